"""Who may use the dashboard, and which requests may change state.

- Token: when one is set (``--token`` or ``JOBQ_WEB_TOKEN``; required for any address but
  loopback), every request must carry it: ``Authorization: Bearer <token>``, or the cookie set
  when a page is opened once with ``?token=<token>`` (then redirected to drop it from the URL).
- CSRF: every POST carries a form field ``csrf`` equal to an HMAC (server secret) of the browser's
  ``jobq_csrf`` cookie, and a cross-site ``Origin`` is refused. The cookies are ``SameSite=Strict``
  and ``HttpOnly``.
- ``--read-only``: every POST is refused (the pages show no action).
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
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "frame-ancestors 'none'; form-action 'self'; base-uri 'none'")


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
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host"):
        return f"cross-site request from {origin} refused"
    if CSRF_COOKIE not in request.cookies or not sent:
        return "missing CSRF token: reload the page and try again"
    if not hmac.compare_digest(sent, csrf_token(request)):
        return "stale or wrong CSRF token: reload the page and try again"
    return None


class Guard(BaseHTTPMiddleware):
    """Token check on every request, security headers and the CSRF cookie on every answer."""

    def __init__(self, app: Any, settings: Any) -> None:
        super().__init__(app)
        self.settings = settings

    async def dispatch(self, request: Request, call_next: Any) -> Response:
        token = self.settings.token
        if token:
            given = request.query_params.get("token")
            if given is not None and hmac.compare_digest(given, token):
                return self._login(request, token)
            if not self._authorized(request, token):
                return self._refuse()
        response = await call_next(request)
        self._headers(request, response)
        return response

    def _authorized(self, request: Request, token: str) -> bool:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer ") and hmac.compare_digest(header[7:].strip(), token):
            return True
        cookie = request.cookies.get(TOKEN_COOKIE)
        return cookie is not None and hmac.compare_digest(cookie, token)

    def _login(self, request: Request, token: str) -> Response:
        """Remember the token in a cookie and drop it from the URL (history, logs, Referer)."""
        rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
        # request.url.path is the path the browser asked for (with any --root-path prefix)
        url = request.url.path + (f"?{urlencode(rest)}" if rest else "")
        response = RedirectResponse(url, status_code=303)
        response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", path=self._cookie_path())
        self._headers(request, response)
        return response

    def _refuse(self) -> Response:
        body = ("<!doctype html><title>jobq: token required</title><h1>401: token required</h1>"
                "<p>This dashboard needs its access token: open it once with <code>?token=...</code> "
                "or send <code>Authorization: Bearer ...</code>.</p>")
        return HTMLResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer",
                                                            "Content-Security-Policy": CSP})

    def _headers(self, request: Request, response: Response) -> None:
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["X-Frame-Options"] = "DENY"
        if CSRF_COOKIE not in request.cookies and getattr(request.state, "csrf_cookie", None):
            response.set_cookie(CSRF_COOKIE, request.state.csrf_cookie, httponly=True, samesite="strict",
                                path=self._cookie_path())

    def _cookie_path(self) -> str:
        return self.settings.root_path or "/"
