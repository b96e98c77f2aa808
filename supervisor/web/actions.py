"""The dashboard's actions (POST): retry, cancel or purge selected jobs, pause and resume.

They call the functions the CLI commands call (``supervisor.views.actions``), so the rules and the
messages are the CLI's. Each checks the CSRF token and ``--read-only`` first, then redirects
(303) back to the page it came from with the outcome to show there.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from supervisor.views import actions as ops
from shared.model.queuenames import queue_name_error

from . import pages, security

MAX_IDS = 1000
MAX_BODY = 256 * 1024


async def _form(request: Request) -> dict[str, list[str]]:
    """The url-encoded form (no multipart: the pages send none), after the read-only and CSRF checks."""
    if request.app.state.settings.read_only:
        raise HTTPException(
            403, "this dashboard is read-only (started with --read-only): actions are refused"
        )
    body = await request.body()
    if len(body) > MAX_BODY:
        raise HTTPException(400, f"form too large ({len(body)} bytes, at most {MAX_BODY})")
    form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    why = security.check_csrf(request, (form.get("csrf") or [None])[0])
    if why:
        raise HTTPException(403, why)
    return form


def _back(
    request: Request, form: dict[str, list[str]], default: str, flash: dict[str, Any]
) -> Response:
    """Redirect to the form's ``back`` page (a path of this dashboard only) showing ``flash``."""
    base = request.app.state.settings.root_path
    back = (form.get("back") or [default])[0]
    parts = urlsplit(back)
    if parts.scheme or parts.netloc or not back.startswith("/"):
        back = default
    key = request.app.state.backend.flash(flash)
    sep = "&" if "?" in back else "?"
    return RedirectResponse(f"{base}{back}{sep}{urlencode({'done': key})}", status_code=303)


async def jobs(request: Request) -> Response:
    form = await _form(request)
    action = (form.get("action") or [""])[0]
    ids = [i.strip() for i in form.get("ids", []) if i.strip()]
    for i in ids:
        pages.no_nul("job id", i)
    fns = {
        "retry": lambda s, now: ops.retry_ids(s, ids, now),
        "cancel": lambda s, now: ops.cancel_ids(s, ids, now),
        "purge": lambda s, now: ops.purge_ids(s, ids),
    }
    if action not in fns:
        raise HTTPException(400, f"action {action!r} is not one of retry, cancel, purge")
    if not ids:
        raise HTTPException(400, f"{action}: select at least one job")
    if len(ids) > MAX_IDS:
        raise HTTPException(400, f"{action}: {len(ids)} jobs selected, at most {MAX_IDS} at once")
    b = request.app.state.backend
    outcome = fns[action](b.store(), b.clock.now())
    flash = {"ok": not outcome.skipped, "lines": outcome.lines(), "summary": outcome.summary()}
    default = "/jobs" if action == "purge" else f"/jobs/{ids[0]}" if len(ids) == 1 else "/jobs"
    if action == "purge" and (form.get("back") or [""])[0].startswith("/jobs/"):
        form["back"] = ["/jobs"]  # the job page is gone with the job
    return _back(request, form, default, flash)


async def pause(request: Request) -> Response:
    return await _pause(request, True)


async def resume(request: Request) -> Response:
    return await _pause(request, False)


async def _pause(request: Request, paused: bool) -> Response:
    form = await _form(request)
    queue = (form.get("queue") or [None])[0]  # a named queue's button (docs/queues.md); none: all
    why = None if queue is None else queue_name_error(queue)
    if why is not None:
        raise HTTPException(400, why)
    text = ops.set_paused(request.app.state.backend.store(), paused, queue)
    return _back(request, form, "/", {"ok": True, "lines": [text], "summary": None})
