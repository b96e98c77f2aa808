"""The heartbeat thread: keeps the leases of the worker's running jobs fresh and notices when the
supervisor that started the worker has died.

It opens its own SQLite connection (connections are not shared between threads).
"""
from __future__ import annotations

import os
import threading
from typing import Any, Callable

from shared.config import Config
from shared.logs import event, get_logger
from shared.store import SqliteStore

log = get_logger("worker")

ORPHAN_CHECK = 0.5   # seconds between checks that the parent is alive
IDLE_BEAT = 15.0     # seconds between beats while no job runs: only the process row is refreshed,
                     # and every write wakes every idle worker (they watch the WAL)


class Heartbeat(threading.Thread):
    def __init__(self, config: Config, owner: str, clock: Any, parent_pid: int | None,
                 on_orphaned: Callable[[], None]) -> None:
        super().__init__(name="jobq-heartbeat", daemon=True)
        self.config = config
        self.owner = owner
        self.clock = clock
        self.parent_pid = parent_pid
        self.on_orphaned = on_orphaned
        self._halt = threading.Event()
        self.orphaned = threading.Event()
        self.busy = False  # set by the worker while it holds claimed jobs

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=5)

    def run(self) -> None:
        store = None
        last_beat = self.clock.monotonic()
        try:
            while not self._halt.is_set():
                if self.parent_pid is not None and not self.orphaned.is_set() \
                        and os.getppid() != self.parent_pid:
                    self.orphaned.set()
                    self.on_orphaned()
                now = self.clock.monotonic()
                every = self.config.worker.heartbeat_interval if self.busy else IDLE_BEAT
                if now - last_beat >= every:
                    last_beat = now
                    store = self._beat(store)
                self._halt.wait(min(ORPHAN_CHECK, self.config.worker.heartbeat_interval))
        finally:
            if store is not None:
                store.close()

    def _beat(self, store: SqliteStore | None) -> SqliteStore | None:
        try:
            if store is None:
                store = SqliteStore.from_config(self.config, migrate=False)
            store.heartbeat(self.owner, self.clock.now())
        except Exception as exc:  # noqa: BLE001 - a failed beat is logged; the lease may lapse
            event(log, "worker.heartbeat_failed", 30, owner=self.owner, error=str(exc))
            if store is not None:
                store.close()
            return None
        return store
