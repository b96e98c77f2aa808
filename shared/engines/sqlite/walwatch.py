"""Wake an idle worker when the database changes, instead of polling fast.

Every commit appends frames to the WAL file, so an inotify watch on the database's folder,
filtered to the ``-wal`` file, fires for every commit by any process: enqueues through
``JobQueue``, transactional enqueues through an application's own connection, and retries all
wake the worker. The event comes as the frames are written, before the commit completes: a
woken worker claims (which waits for the write lock, so it sees the commit) rather than reads.
Where inotify is missing the worker falls back to polling every ``poll_interval``. Only the idle
lead waits on this watch (:mod:`.lead`, :mod:`.wakeup`).
"""

from __future__ import annotations

from ..filewatch import FileWatch


class WalWatch(FileWatch):
    """``fileno()`` becomes readable when the database's WAL is written; ``drain()`` resets it."""

    def __init__(self, database: str) -> None:
        super().__init__(database + "-wal")
