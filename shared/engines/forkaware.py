"""Stores survive ``fork()``: a child never uses, nor closes, its parent's database connection.

An application that makes a ``JobQueue`` at import (a module-level queue for follow-up jobs) and
then forks (``multiprocessing``, a pre-forking server, a template of workers) would otherwise
share one connection between processes: on PostgreSQL the two interleave messages on one socket
(``"D" message without prior row description``, ``prepared statement "_pg3_0" already exists``),
and when the child closes it, libpq sends the server a terminate message that ends the parent's
session too; SQLite's own advice is never to carry a connection across a fork.

So every store registers here (weakly: a store that is gone is forgotten, nothing is kept
alive), and one ``os.register_at_fork`` callback tells each live store, in the child, to let go
of its connection (its ``_after_fork`` method) and connect again on first use:

- PostgreSQL: the inherited socket is replaced, in the child only, by a dead one before the
  driver's connection object is closed, so the terminate message goes nowhere and the parent's
  session carries on (:func:`disown_socket`).
- SQLite: the inherited handle is kept in :data:`_INHERITED` and never closed in the child
  (closing the last handle may checkpoint and remove the WAL file other processes still use).
  The parent should hold no transaction open at the fork (jobq's calls never leave one open).

:func:`open_connections` is the other half, for the worker template, which must not fork while
a handler module holds any connection to the database: a SQLite file's descriptors, or a socket
to the PostgreSQL server (over TCP or a unix socket).
"""
from __future__ import annotations

import os
import socket
import stat
import weakref
from typing import Any

from .. import database as database_mod

# The two module-level objects the fork callback needs: the live stores of this process, and
# (in a child only) the SQLite handles it inherited, held so that nothing ever closes them.
_STORES: "weakref.WeakSet[Any]" = weakref.WeakSet()
_INHERITED: list[Any] = []
DEFAULT_PORT = 5432


def track(store: Any) -> None:
    """Call ``store._after_fork()`` in the child of every later fork of this process, for as
    long as ``store`` exists (it is referenced weakly)."""
    _STORES.add(store)


def keep_forever(handle: Any) -> None:
    """Hold ``handle`` (a connection inherited across a fork) until this process exits."""
    _INHERITED.append(handle)


def _in_child() -> None:
    for store in list(_STORES):
        try:
            store._after_fork()
        except Exception:  # noqa: BLE001 - a store left as it was reconnects or fails on use
            pass


os.register_at_fork(after_in_child=_in_child)


def disown_socket(fd: int) -> None:
    """In a child after fork: point ``fd`` at a socket whose peer is closed, so whatever the
    driver still writes there (a terminate message on close) never reaches the parent's
    connection; the shared socket itself stays open in the parent only."""
    mine, other = socket.socketpair()
    other.close()
    try:
        os.dup2(mine.fileno(), fd)
    finally:
        mine.close()


# -- what the worker template checks before it forks ----------------------------------------------

def open_connections(database: str) -> list[str]:
    """The descriptors of this process connected to ``database`` (a SQLite file path, or a
    ``postgresql://`` URL): ``"fd N: what"`` for each. Empty where ``/proc`` is missing."""
    folder = "/proc/self/fd"
    try:
        fds = os.listdir(folder)
    except OSError:
        return []
    try:
        target = database_mod.parse(database)
    except ValueError:
        return []  # a value no engine opens: no connection to it either
    is_server = target.engine != "sqlite"
    ports = server_ports(database) if is_server else set()
    db = "" if is_server else os.path.realpath(target.location)
    out = []
    for fd in fds:
        try:
            path = os.readlink(f"{folder}/{fd}")
        except OSError:
            continue
        if not is_server:
            if path.startswith(db):
                out.append(f"fd {fd}: {path}")
        elif path.startswith("socket:"):
            peer = _peer(int(fd))
            if peer is not None and _is_server(peer, ports):
                out.append(f"fd {fd}: a connection to the database server at {peer}")
    return out


def server_ports(url: str) -> set[int]:
    """The ports a PostgreSQL URL connects to (its hosts' ports, ``PGPORT``, or 5432)."""
    ports: set[int] = set()
    try:
        from psycopg.conninfo import conninfo_to_dict
        given = str(conninfo_to_dict(url).get("port") or "")
    except Exception:  # noqa: BLE001 - no driver, or a URL it refuses: the default port
        given = ""
    for part in (given or os.environ.get("PGPORT", "")).split(","):
        if part.strip().isdigit():
            ports.add(int(part))
    return ports or {DEFAULT_PORT}


def _peer(fd: int) -> Any:
    """The peer address of socket ``fd`` (read through a duplicate), or None."""
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            return None
        with socket.socket(fileno=os.dup(fd)) as s:
            if s.family not in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
                return None
            return s.getpeername()
    except OSError:
        return None


def _is_server(peer: Any, ports: set[int]) -> bool:
    """A PostgreSQL server's address: a TCP peer on one of ``ports``, or a unix socket named
    ``.s.PGSQL.<port>`` (the server's socket file, in whatever folder)."""
    if isinstance(peer, tuple):
        return len(peer) >= 2 and peer[1] in ports
    if isinstance(peer, bytes):
        peer = peer.decode("utf-8", "replace")
    name = os.path.basename(str(peer))
    return any(name == f".s.PGSQL.{p}" for p in ports)
