"""Who may use the dashboard, and which requests may change state.

- Token: when one is set (``--token`` or ``JOBQ_WEB_TOKEN``; required for any address but
  loopback), every request must carry it: ``Authorization: Bearer <token>``, or the cookie set
  when a page is opened once with ``?token=<token>`` (then redirected to drop it from the URL).
- CSRF: every POST carries a form field ``csrf`` equal to an HMAC (server secret) of the browser's
  ``jobq_csrf`` cookie, and a cross-site ``Origin`` is refused. The cookies are ``SameSite=Strict``
  and ``HttpOnly``.
- ``--read-only``: every POST is refused (the pages show no action).
- Host: the dashboard answers only to the names it was started for: the bind address,
  ``localhost``, loopback addresses (127.0.0.1, ``[::1]``) and each ``--allow-host``. Any
  other ``Host`` header is refused (400): a DNS-rebinding page (``rebind.attacker.example``
  resolving to 127.0.0.1) cannot read or change anything. Bound to every address (0.0.0.0,
  ``::``, a token is required there) any name is served unless ``--allow-host`` names some.
  A POST's ``Origin`` must name one of those hosts too (never compared with the request's own,
  attacker-chosen, ``Host``).
- Tokens and CSRF values are compared as bytes (``hmac.compare_digest``): any text, ASCII or
  not, is a match or a refusal, never an error.
- Every answer forbids framing and scripts or styles from elsewhere (Content-Security-Policy).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from typing import Any
from urllib.parse import urlencode, urlsplit

from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

TOKEN_COOKIE = "jobq_token"
CSRF_COOKIE = "jobq_csrf"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
)


WILDCARDS = ("0.0.0.0", "::", "")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
PAGE = (
    '<!doctype html><html lang="en"><meta charset="utf-8"><title>jobq: {title}</title>'
    "<h1>{status}: {title}</h1><p>{text}</p></html>"
)
REFUSALS = {
    400: (
        "unknown host",
        "This dashboard answers only to the names it was started for (its address, "
        "localhost, and each <code>--allow-host</code>).",
    ),
    401: (
        "token required",
        "This dashboard needs its access token: open it once with <code>?token=...</code> "
        "or send <code>Authorization: Bearer ...</code>.",
    ),
    500: ("internal error", "The dashboard hit an error; its log has the details."),
}


def refusal(status: int) -> Response:
    """A fixed page (nothing of the request or the database in it) with the security headers."""
    title, text = REFUSALS[status]
    response = HTMLResponse(
        PAGE.format(status=status, title=title, text=text), status_code=status, headers=HEADERS
    )
    if status == 401:
        response.headers["WWW-Authenticate"] = "Bearer"
    return response


def same(given: str | None, expected: str) -> bool:
    """``given == expected`` in constant time, for any text (compared as UTF-8 bytes)."""
    return given is not None and hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def hostname(netloc: str) -> str | None:
    """The host of ``host[:port]`` (``[v6]:port`` too), lower case, without a trailing dot;
    None when it does not parse."""
    try:
        name = urlsplit(f"//{netloc}").hostname
    except ValueError:
        return None
    return name.rstrip(".") if name else None


def host_allowed(name: str | None, bind: str, allowed: tuple[str, ...]) -> bool:
    """May a request naming ``name`` (its Host, or a POST's Origin) be served? See the module
    docstring: the bind address, localhost, loopback addresses on a loopback bind, ``allowed``."""
    if name is None:
        return False
    bind = bind.strip("[]").lower()
    if name in allowed or name in (bind, "localhost") or _loopback_ip(name):
        return True  # a loopback address is no DNS name: no other site can make a browser send it
    return bind in WILDCARDS and not allowed


def _loopback_ip(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_loopback(host: str) -> bool:
    """True for addresses only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def csrf_token(request: Request) -> str:
    """The CSRF token for this browser: an HMAC of its ``jobq_csrf`` cookie."""
    secret = request.app.state.settings.secret
    return hmac.new(secret.encode(), _csrf_cookie(request).encode(), hashlib.sha256).hexdigest()


def _csrf_cookie(request: Request) -> str:
    value = getattr(request.state, "csrf_cookie", None)
    if value is None:
        value = request.cookies.get(CSRF_COOKIE) or secrets.token_hex(16)
        request.state.csrf_cookie = value
    return value


def check_csrf(request: Request, sent: str | None) -> str | None:
    """None when the POST may proceed, else the reason it may not."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and not _origin_ok(request, origin):
        return f"cross-site request from {origin} refused"
    if CSRF_COOKIE not in request.cookies or not sent:
        return "missing CSRF token: reload the page and try again"
    if not same(sent, csrf_token(request)):
        return "stale or wrong CSRF token: reload the page and try again"
    return None


def _origin_ok(request: Request, origin: str) -> bool:
    """The page that sent the POST is one of this dashboard's hosts. Bound to every address
    with no ``--allow-host`` (any name served; a token is required there) it must also be the
    name the request was sent to."""
    s = request.app.state.settings
    try:
        parts = urlsplit(origin)
        name = parts.hostname
    except ValueError:
        return False
    if not host_allowed(name, s.host, s.allow_hosts):
        return False
    return (
        s.host.strip("[]") not in WILDCARDS
        or bool(s.allow_hosts)
        or parts.netloc == request.headers.get("host")
    )


class Guard(BaseHTTPMiddleware):
    """Token check on every request, security headers and the CSRF cookie on every answer."""

    def __init__(self, app: Any, settings: Any) -> None:
        super().__init__(app)
        self.settings = settings

    async def dispatch(self, request: Request, call_next: Any) -> Response:
        host = request.headers.get("host")
        if host is not None and not host_allowed(
            hostname(host), self.settings.host, self.settings.allow_hosts
        ):
            return refusal(
                400
            )  # DNS rebinding: a page of another site that resolved to this server
        token = self.settings.token
        if token:
            if same(request.query_params.get("token"), token):
                return self._login(request, token)
            if not self._authorized(request, token):
                return refusal(401)
        response = await call_next(request)
        self._headers(request, response)
        return response

    def _authorized(self, request: Request, token: str) -> bool:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer ") and same(header[7:].strip(), token):
            return True
        return same(request.cookies.get(TOKEN_COOKIE), token)

    def _login(self, request: Request, token: str) -> Response:
        """Remember the token in a cookie and drop it from the URL (history, logs, Referer)."""
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        # request.url.path is the path the browser asked for (with any --root-path prefix)
        url = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(url, status_code=303)
        response.set_cookie(
            TOKEN_COOKIE, token, httponly=True, samesite="strict", path=self._cookie_path()
        )
        self._headers(request, response)
        return response

    def _headers(self, request: Request, response: Response) -> None:
        response.headers.update(HEADERS)
        if CSRF_COOKIE not in request.cookies and getattr(request.state, "csrf_cookie", None):
            response.set_cookie(
                CSRF_COOKIE,
                request.state.csrf_cookie,
                httponly=True,
                samesite="strict",
                path=self._cookie_path(),
            )

    def _cookie_path(self) -> str:
        return self.settings.root_path or "/"
