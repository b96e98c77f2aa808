"""shared.engines.forkaware: what a store does in a forked child, and finding this process's
connections to a database before the worker template forks."""

from __future__ import annotations

import os
import socket
import weakref

import pytest

from shared.engines import forkaware


def test_every_live_store_lets_go_in_the_child_and_a_failing_one_does_not_stop_the_others(
    monkeypatch,
):
    monkeypatch.setattr(forkaware, "_STORES", weakref.WeakSet())  # not this process's real ones
    calls = []

    class Store:
        def __init__(self, name, fail=False):
            self.name, self.fail = name, fail

        def _after_fork(self):
            calls.append(self.name)
            if self.fail:
                raise RuntimeError("cannot")

    a, b = Store("a", fail=True), Store("b")
    forkaware.track(a)
    forkaware.track(b)
    forkaware.track(Store("gone"))  # referenced weakly: forgotten
    forkaware._in_child()
    assert sorted(calls) == ["a", "b"]


def test_file_handles_name_the_file_and_its_companions(tmp_path):
    db = tmp_path / "jobs.db"
    with open(db, "w") as f1, open(f"{db}-wal", "w") as f2, open(tmp_path / "other", "w"):
        found = forkaware.file_handles(str(db))
        assert sorted(found) == sorted([f"fd {f1.fileno()}: {db}", f"fd {f2.fileno()}: {db}-wal"])
    assert forkaware.file_handles(str(db)) == []


def test_socket_handles_name_this_processs_sockets_by_peer():
    a, b = socket.socketpair()
    try:
        found = forkaware.socket_handles(lambda peer: True, "peer")
        assert any(x.startswith(f"fd {a.fileno()}: peer") for x in found)
        assert forkaware.socket_handles(lambda peer: False, "peer") == []
    finally:
        a.close()
        b.close()


def test_a_disowned_socket_writes_nowhere_and_the_parents_stays_connected():
    a, b = socket.socketpair()
    parents = os.dup(a.fileno())  # the parent's hold on the shared connection
    try:
        forkaware.disown_socket(a.fileno())
        with pytest.raises(OSError):
            a.send(b"terminate")
        b.setblocking(False)
        with pytest.raises(BlockingIOError):
            b.recv(16)  # nothing reached the server's end
        os.write(parents, b"query")
        assert b.recv(16) == b"query"
    finally:
        os.close(parents)
        a.close()
        b.close()
