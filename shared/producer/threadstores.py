"""The store of a :class:`shared.producer.api.JobQueue` as each thread sees it: a queue works
from any thread (a web server's thread pool, ``asyncio.to_thread``, an executor).

The thread that made the queue uses the store the queue opened; any other thread gets, on its
first call, the engine's ``for_thread()`` store: a connection of its own on SQLite (a SQLite
connection belongs to one thread; readers then never wait for each other), the queue's one
connection under its lock on PostgreSQL (a server connection is scarce; its calls take turns).
A thread's store lives as long as the thread, or until the queue is closed, which closes every
store it lent from whatever thread closes the queue (a SQLite connection closed from another
thread than its own is let go of, and closed by SQLite as it is freed).

:class:`ThreadStores` stands for the store: every attribute is the calling thread's store's, so
code that holds ``queue.store`` (handles, the inline runner, the ops layer) needs no change.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any


class ThreadStores:
    """A store per thread, behind one object (see the module's docstring)."""

    def __init__(self, store: Any) -> None:
        self._owner = store
        self._thread = threading.current_thread()  # (a dead thread's ident may be reused)
        self._local = threading.local()
        self._lent: weakref.WeakSet[Any] = weakref.WeakSet()  # the threads' stores, for close()
        self._lock = threading.Lock()
        self._closed = False

    def current(self) -> Any:
        """The calling thread's store (opened on its first call)."""
        if threading.current_thread() is self._thread:
            return self._owner
        store = getattr(self._local, "store", None)
        if store is None:
            if self._closed:  # its calls raise the engine's "store is closed"
                return self._owner
            store = self._owner.for_thread()
            self._local.store = store
            with self._lock:
                self._lent.add(store)
        return store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.current(), name)

    def close(self) -> None:
        """Close the queue's store and every store lent to a thread (idempotent)."""
        with self._lock:
            self._closed = True
            lent = list(self._lent)
            self._lent = weakref.WeakSet()
        for store in lent:
            store.close()
        self._owner.close()

    @property
    def closed(self) -> bool:
        return self._closed or bool(self._owner.closed)
