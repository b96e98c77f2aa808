"""shared.producer.waithub: the hub's one read for every waiter, which tickets it fires, and its
back-off (on a hub without its thread); the process a hub belongs to. Waiting on real jobs, on
both engines: tests/behaviour/test_tasks.py and test_inline.py."""

from __future__ import annotations

import os
import threading

import pytest

from shared.producer import waithub
from shared.producer.waithub import Hub, Hubs, Ticket


@pytest.fixture
def hub():
    """A Hub's state without its thread: the test calls its steps itself."""
    h = Hub.__new__(Hub)
    h.config, h.cond, h.tickets = None, threading.Condition(), []
    h.fresh, h.closed, h.pid = False, False, os.getpid()
    h.pipe_r, h.pipe_w = os.pipe()
    os.set_blocking(h.pipe_r, False)
    yield h
    os.close(h.pipe_r)
    os.close(h.pipe_w)


def ticket(hub, *ids):
    fired = []
    t = Ticket(list(ids), lambda: fired.append(True))
    hub.tickets.append(t)
    return t, fired


def test_one_read_fires_the_tickets_whose_jobs_all_ended_or_are_gone(hub, monkeypatch):
    reads = []

    def statuses(store, ids):
        reads.append(sorted(ids))
        return {"a": "completed", "b": "running", "c": "failed"}

    monkeypatch.setattr(waithub, "statuses", statuses)
    done, fired_done = ticket(hub, "a", "c")
    gone, fired_gone = ticket(hub, "a", "deleted")
    busy, fired_busy = ticket(hub, "a", "b")
    hub._check("store", list(hub.tickets))
    assert reads == [["a", "b", "c", "deleted"]]
    assert fired_done == fired_gone == [True] and fired_busy == []
    assert hub.tickets == [busy] and done.error is None


def test_fire_sets_the_error_and_skips_a_ticket_that_left(hub):
    t1, fired1 = ticket(hub, "a")
    t2, fired2 = ticket(hub, "b")
    hub.tickets.remove(t2)  # its waiter gave up meanwhile
    err = RuntimeError("down")
    hub._fire([t1, t2], err)
    assert fired1 == [True] and t1.error is err and fired2 == [] and t2.error is None


class Watch:
    def __init__(self, committed: bool):
        self.r, self.w = os.pipe()
        if committed:
            os.write(self.w, b"x")

    def fileno(self):
        return self.r

    def drain(self):
        return bool(os.read(self.r, 64))

    def close(self):
        os.close(self.r)
        os.close(self.w)


def test_back_off_without_a_watch_grows_to_its_cap(hub, monkeypatch):
    monkeypatch.setattr(waithub, "POLL_CAP", 0.003)
    assert hub._sleep(None, 0.001) == pytest.approx(0.001 * waithub.POLL_GROWTH)
    assert hub._sleep(None, 0.0025) == 0.003


def test_with_a_watch_a_commit_settles_and_quiet_doubles_to_its_cap(hub, monkeypatch):
    monkeypatch.setattr(waithub, "WATCHED_CAP", 0.003)
    committed, quiet = Watch(True), Watch(False)
    try:
        assert hub._sleep(committed, 1.0) == waithub.SETTLE
        assert hub._sleep(quiet, 0.001) == 0.002
        assert hub._sleep(quiet, 0.002) == 0.003
    finally:
        committed.close()
        quiet.close()


def test_a_new_waiters_byte_is_drained(hub):
    os.write(hub.pipe_w, b"...")
    hub._sleep(None, 1.0)  # returns at once: the pipe is ready
    assert waithub._read(hub.pipe_r) == b""


def test_a_hub_belongs_to_the_process_that_made_it():
    hubs = Hubs(config=None)
    first = hubs.get()
    try:
        assert hubs.get() is first
        first.pid = -1  # as a forked child sees its parent's hub
        second = hubs.get()
        assert second is not first and second.pid == os.getpid()
        hubs.close()
        assert hubs.current is None
        with pytest.raises(RuntimeError, match="the queue was closed"):
            second.add(["a"], lambda: None)
    finally:
        first.pid = os.getpid()
        first.close()
