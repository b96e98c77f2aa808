"""The dashboard's ASGI application: settings, the database it reads, templates and routes.

One :class:`Backend` per server holds one SQLite connection, used only from the event loop's
thread (the views are ``async`` and their queries short), opened on first use: a database that
cannot be opened gives an error page and is tried again on the next request.
"""

from __future__ import annotations

import logging
import secrets
import sys
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from shared.runtime.clock import SystemClock
from shared.settings.config import Config
from shared.engines.contract import EngineStore
from shared.engines.location import scrub
from shared.engines import driver_errors, open_store, target
from shared.model.errors import StoreError, StoreQueryError

from . import actions, filters, pages, security
from .html import error_page
from .overview import Chart

HERE = Path(__file__).parent
log = logging.getLogger("jobq.web")


@dataclass
class Settings:
    """How the dashboard was started (see ``jobq web --help``)."""

    config: Config
    config_path: str
    token: str | None = None
    read_only: bool = False
    root_path: str = ""
    host: str = "127.0.0.1"  # the bind address: a Host the dashboard answers to
    allow_hosts: tuple[str, ...] = ()  # --allow-host: more names it answers to
    secret: str = field(default_factory=lambda: secrets.token_hex(32))  # signs CSRF tokens


class DatabaseUnavailable(Exception):
    """The database could not be opened or read; the message names it and the cause."""


class Backend:
    """The database connection, the chart state and the flash messages of one server."""

    def __init__(self, settings: Settings, clock: Any = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self.chart = Chart()
        self.flashes: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._store: EngineStore | None = None

    def store(self) -> EngineStore:
        if self._store is None:
            try:
                self._store = open_store(self.settings.config)
            except (StoreError, *driver_errors()) as exc:
                raise DatabaseUnavailable(str(exc)) from exc
        return self._store

    def drop(self) -> None:
        """Forget the connection after an error (the next request opens a new one)."""
        if self._store is not None:
            try:
                self._store.close()
            except (StoreError, *driver_errors()):
                pass
            self._store = None

    def flash(self, message: dict[str, Any]) -> str:
        """Keep ``message`` for the page the browser is redirected to; its id (the last 50 kept)."""
        key = secrets.token_hex(8)
        self.flashes[key] = message
        while len(self.flashes) > 50:
            self.flashes.popitem(last=False)
        return key

    def close(self) -> None:
        self.drop()


def templates() -> Environment:
    """Autoescaping Jinja environment over the package's templates: payloads and errors are
    always text in the page, never markup."""
    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    filters.install(env)
    return env


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    titles = {400: "Bad request", 403: "Forbidden", 404: "Not found", 405: "Method not allowed"}
    return error_page(
        request, exc.status_code, titles.get(exc.status_code, "Error"), str(exc.detail)
    )


async def _db_error(request: Request, exc: Exception) -> Response:
    request.app.state.backend.drop()
    s = request.app.state.settings
    if isinstance(exc, StoreQueryError):  # the database answered: it refused the statement
        return error_page(
            request,
            500,
            "Database error",
            scrub(
                f"{exc}. The database is reachable but refused the statement: is it jobq's schema, "
                f"as this version of jobq made it?",
                s.config.database,
            ),
        )
    what = (
        "the database URL in {} and that the server is up"
        if target(s.config.database).server
        else "the database path in {} and that this user can read and write it"
    )
    return error_page(
        request,
        503,
        "Database unavailable",
        scrub(f"{exc}. Check {what.format(s.config_path)}.", s.config.database),
    )


async def _internal(request: Request, exc: Exception) -> Response:
    """A fixed page: the error may have come before the token was checked (its log has it)."""
    if isinstance(exc, (StoreError, *driver_errors(), DatabaseUnavailable)):
        return await _db_error(request, exc)
    log.exception("internal error serving %s", request.url.path)
    text = scrub(repr(exc), request.app.state.settings.config.database)
    print(f"jobq web: internal error serving {request.url.path}: {text}", file=sys.stderr)
    return security.refusal(500)


async def healthz(request: Request) -> Response:
    return PlainTextResponse("ok")


def create_app(settings: Settings, clock: Any = None) -> Starlette:
    """The dashboard application for ``settings``."""
    routes = [
        Route("/", pages.overview),
        Route("/live/overview", pages.overview_live),
        Route("/jobs", pages.jobs),
        Route("/jobs/{job_id}", pages.job),
        Route("/live/jobs/{job_id}", pages.job_live),
        Route("/schedules", pages.schedules),
        Route("/types", pages.types),
        Route("/actions/jobs", actions.jobs, methods=["POST"]),
        Route("/actions/pause", actions.pause, methods=["POST"]),
        Route("/actions/resume", actions.resume, methods=["POST"]),
        Route("/healthz", healthz),
        Mount("/static", app=StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            HTTPException: _http_error,
            DatabaseUnavailable: _db_error,
            StoreError: _db_error,
            **{e: _db_error for e in driver_errors()},
            Exception: _internal,
        },
    )
    app.state.settings = settings
    app.state.backend = Backend(settings, clock)
    app.state.env = templates()
    app.add_middleware(security.Guard, settings=settings)
    return app
