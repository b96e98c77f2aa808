"""A new SQLite connection's first writes poll for the write lock instead of sleeping in SQLite's
busy handler (the eighth worker's first claim waited behind busy workers)."""

from __future__ import annotations

import sqlite3
import threading

from shared.engines.sqlite.connection import SqliteConnection


def busy_timeout(c: sqlite3.Connection) -> int:
    return next(iter(c.execute("PRAGMA busy_timeout").fetchone().values()))  # (rows are dicts)


def test_the_first_writes_poll_and_later_ones_use_the_busy_handler(tmp_path):
    conn = SqliteConnection(str(tmp_path / "jobq.db"), busy_timeout=5.0)
    try:
        seen = [conn._write(busy_timeout) for _ in range(10)]
        assert seen[0] == 0 and seen[-1] == 5000  # polled without the handler, then the handler
        assert seen == sorted(seen)
        assert busy_timeout(conn.conn) == 5000  # reads keep the handler throughout
    finally:
        conn.close()


def test_a_first_write_waits_for_a_held_lock_and_gets_it(tmp_path):
    path = str(tmp_path / "jobq.db")
    conn = SqliteConnection(path, busy_timeout=5.0)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        holder.execute("BEGIN IMMEDIATE")
        released = threading.Event()

        def release() -> None:
            released.wait(5)
            holder.execute("COMMIT")

        t = threading.Thread(target=release)
        t.start()

        def write(c: sqlite3.Connection) -> int:
            released.set()  # the first try is refused (the lock is held); later tries get it
            c.execute("BEGIN IMMEDIATE")
            c.execute("COMMIT")
            return busy_timeout(c)

        assert conn._write(write) == 0
        t.join()
        assert busy_timeout(conn.conn) == 5000
    finally:
        holder.close()
        conn.close()
