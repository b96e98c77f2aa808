"""Is a Django database alias the jobq database? Then a task is enqueued through Django's own
connection, inside the caller's transaction (``JobQueue.enqueue(conn=...)``).

The answer compares what Django's settings name with the jobq ``database`` value: the same
file (both resolved), or the same server, port and database name. jobq's tables may sit in a
schema of their own: its statements name their tables, so a connection of the same database
reaches them. Nothing here connects.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from shared.engines.location import parse

_LOCAL = ("", "localhost", "127.0.0.1", "::1")
_DEFAULT_PORT = "5432"


def same_database(settings_dict: dict[str, Any], vendor: str, database: str) -> bool:
    """Does the Django database ``settings_dict`` (its connection's ``vendor``) name the jobq
    ``database``? False when either cannot be told (an in-memory file, a service name)."""
    try:
        target = parse(database)
    except ValueError:
        return False
    if vendor != target.engine:
        return False
    if "://" not in target.location:  # a file: the location is its path
        name = str(settings_dict.get("NAME") or "")
        if not name or name == ":memory:" or name.startswith("file:"):
            return False
        return os.path.realpath(name) == os.path.realpath(target.location)
    mine = _server_of_settings(settings_dict)
    return mine is not None and mine == _server_of_url(target.location)


def _host(value: str | None) -> str:
    """A host as compared: every name of this machine (and a socket folder) is one."""
    host = (value or "").strip()
    return "local" if host in _LOCAL or host.startswith("/") else host.lower()


def _server_of_settings(s: dict[str, Any]) -> tuple[str, str, str] | None:
    options = s.get("OPTIONS") or {}
    if options.get("service"):
        return None  # a pg_service.conf entry: its server is not in the settings
    name = str(s.get("NAME") or "")
    return (_host(s.get("HOST")), str(s.get("PORT") or _DEFAULT_PORT), name) if name else None


def _server_of_url(url: str) -> tuple[str, str, str]:
    parts = urlsplit(url)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    host = unquote(parts.hostname or "") or query.get("host", "")
    port = str(parts.port or query.get("port") or _DEFAULT_PORT)
    return _host(host), port, unquote(parts.path.lstrip("/")) or query.get("dbname", "")
