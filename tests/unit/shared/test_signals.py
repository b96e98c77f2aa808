"""shared.runtime.signals: signals recorded through a self-pipe, read when the owner is ready
(a supervisor's and a worker's own signals on real processes: tests/process)."""

from __future__ import annotations

import os
import signal

import pytest

from shared.runtime.signals import SignalQueue


@pytest.fixture
def sq():
    q = SignalQueue([signal.SIGUSR1, signal.SIGUSR2])
    yield q
    q.close()


def test_signals_are_read_in_order_and_handlers_put_back(sq):
    before = signal.getsignal(signal.SIGUSR1)
    sq.install()
    assert sq.drain() == []  # nothing yet
    os.kill(os.getpid(), signal.SIGUSR2)
    os.kill(os.getpid(), signal.SIGUSR1)
    assert sq.wait(5.0) == [sq.fileno]
    assert sq.drain() == [signal.SIGUSR2, signal.SIGUSR1]
    assert sq.drain() == []
    sq.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == before and not sq.installed
    sq.uninstall()  # twice is harmless


def test_a_wake_is_not_a_signal_and_drain_reads_only_when_something_may_be_there(sq):
    sq.drain()
    assert not sq.pending and sq.wait(0) == []
    sq.wake()
    assert sq.pending and sq.wait(0) == [sq.fileno]
    assert sq.drain() == []
    os.write(sq._w, bytes([signal.SIGUSR1]))
    assert sq.drain() == []  # not pending: no read (no system call between jobs)
    sq.pending = True
    assert sq.drain() == [signal.SIGUSR1]


def test_wait_reports_extra_descriptors(sq):
    r, w = os.pipe()
    try:
        os.write(w, b"x")
        assert sq.wait(0, extra=[r]) == [r]
    finally:
        os.close(r)
        os.close(w)


def test_intact_until_a_handler_closes_the_pipe(sq):
    assert sq.intact() and sq.intact(both=False)
    os.close(sq._w)
    assert sq.intact(both=False) and not sq.intact()
    os.close(sq._r)
    r, w = os.pipe()  # the numbers may be reused by another pipe: still not ours
    try:
        assert not sq.intact(both=False)
    finally:
        os.close(r)
        os.close(w)
        sq._r, sq._w = os.pipe()  # for the fixture to close: never a descriptor reused since
