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
a handler module holds any connection to the database (each engine names its own: a database
file's descriptors, a socket to a server); :func:`file_handles` and :func:`socket_handles` find them.
"""

from __future__ import annotations

import os
import socket
import stat
import weakref
from typing import Any, Callable

# The two module-level objects the fork callback needs: the live stores of this process, and
# (in a child only) the SQLite handles it inherited, held so that nothing ever closes them.
_STORES: "weakref.WeakSet[Any]" = weakref.WeakSet()
_INHERITED: list[Any] = []


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


def open_connections(database: Any) -> list[str]:
    """The descriptors of this process connected to ``database`` (a ``database`` value or its
    resolved :class:`~shared.engines.engine.Target`): ``"fd N: what"`` for each, as the target's
    engine finds them. Empty where ``/proc`` is missing, or for a value no engine takes."""
    from . import by_name, target  # here: the registry imports the engines, which import us
    from shared.model.errors import StoreUnavailable

    try:
        where = target(database)
        engine = by_name(where.engine)
    except StoreUnavailable:
        return []  # a value no engine opens: no connection to it either
    return engine.connections(where)


def _links() -> list[tuple[int, str]]:
    """(fd, what it links to) for each descriptor of this process; empty without ``/proc``."""
    folder = "/proc/self/fd"
    try:
        fds = os.listdir(folder)
    except OSError:
        return []
    out = []
    for fd in fds:
        try:
            out.append((int(fd), os.readlink(f"{folder}/{fd}")))
        except OSError:
            continue
    return out


def file_handles(path: str) -> list[str]:
    """``"fd N: PATH"`` for each descriptor open on ``path`` or a file whose name starts with
    it (a database's companion files)."""
    real = os.path.realpath(path)
    return [f"fd {fd}: {link}" for fd, link in _links() if link.startswith(real)]


def socket_handles(is_peer: Callable[[Any], bool], what: str) -> list[str]:
    """``"fd N: WHAT PEER"`` for each socket of this process whose peer address ``is_peer``."""
    out = []
    for fd, link in _links():
        if link.startswith("socket:"):
            peer = _peer(fd)
            if peer is not None and is_peer(peer):
                out.append(f"fd {fd}: {what} {peer}")
    return out


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
