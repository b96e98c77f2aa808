"""The per-job path's cheap forms say what their plain forms said: a batch's
time texts, the progress file's count written through a mapping, the signal pipe's check."""

from __future__ import annotations

import os
import random
import signal

import pytest

from shared.model.bounds import MAX_TIME, MIN_TIME
from shared.runtime.clock import IsoTimes, iso
from shared.execution.progress import ProgressWriter, counts, not_in_hand, unstarted
from shared.runtime.signals import SignalQueue


def _text(fmt, ts):
    try:
        return fmt(ts)
    except ValueError:
        return "ValueError"


def test_iso_times_write_what_iso_writes():
    rnd, text = random.Random(30), IsoTimes()
    now = 1_767_225_600.0
    times = [now + rnd.uniform(-3, 3) for _ in range(5000)] + [
        rnd.uniform(MIN_TIME, MAX_TIME) for _ in range(2000)
    ]
    times += [
        MIN_TIME,
        MIN_TIME - 0.0004,
        MAX_TIME + 0.9994,
        MAX_TIME + 0.9995,
        1.9995,
        59.9996,
        now + 0.9995,
        float("nan"),
        float("inf"),
    ]
    for ts in times:
        assert _text(text, ts) == _text(iso, ts), ts


def test_the_progress_count_survives_a_kill_of_its_writer(tmp_path):
    """The count goes through a shared mapping (no system call per job): a reader sees it, also
    after the writer is SIGKILLed before it closed anything."""
    path = str(tmp_path / "progress")
    pid = os.fork()
    if pid == 0:
        try:
            w = ProgressWriter(path)
            w.started(0)  # before any batch: written with pwrite
            w.batch(["a", "b", "c"], completed=7)
            w.started(1)
            w.started(2)
        finally:
            os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status)
    assert counts(path) == (2, 7)
    assert unstarted(path) == ["c"] and not_in_hand(path) == ["a", "c"]


@pytest.mark.parametrize("both", [True, False])
def test_the_pipe_check_sees_a_closerange_also_with_its_numbers_reused(both):
    q = SignalQueue([signal.SIGHUP])
    try:
        assert q.intact(both=both)
        os.close(q._r)
        os.close(q._w)
        assert not q.intact(both=both)
        again = os.pipe()
        try:
            assert q._r in again
            assert not q.intact(both=both)
        finally:
            for fd in again:
                os.close(fd)
    finally:
        q.close()
