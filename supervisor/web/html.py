"""Rendering a page: the template with the values every page uses."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse

from shared.engines.location import redacted

from . import security


def render(
    request: Request,
    name: str,
    context: dict[str, Any],
    status_code: int = 200,
    headers: dict[str, str] | None = None,
) -> HTMLResponse:
    """The page ``name`` with the values every template uses (base URL, CSRF token, read-only)."""
    app = request.app
    s = app.state.settings
    path = route_path(request)
    ctx = {
        "base": s.root_path,
        "read_only": s.read_only,
        "csrf": security.csrf_token(request),
        "database": redacted(s.config.database),
        "path": path,
        **context,
    }
    return HTMLResponse(
        app.state.env.get_template(name).render(**ctx), status_code=status_code, headers=headers
    )


def error_page(request: Request, status_code: int, title: str, detail: str) -> HTMLResponse:
    """The error template with the security headers set here too: an error answered outside
    the Guard middleware still carries them."""
    return render(
        request,
        "error.html",
        {"title": title, "detail": detail},
        status_code,
        headers=security.HEADERS,
    )


def route_path(request: Request) -> str:
    """The request's path inside the dashboard: without the ``--root-path`` prefix."""
    root, path = request.app.state.settings.root_path, request.url.path
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    return path
