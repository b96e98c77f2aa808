"""A worker's start-up order on its own: what it waits for, and when."""

from __future__ import annotations

import pytest

from shared.settings.config import Config
from shared.model.exitcodes import ExitCode
from shared.execution.handlers import Registry
from worker.loop import Worker


def test_a_forked_worker_waits_to_be_reparented_after_connecting_and_before_its_threads(
    monkeypatch,
):
    """The template's go-between exits while the worker opens its database: the worker waits
    for it (``settle``: it must be the supervisor's child before its heartbeat's orphan check)
    only then, not before connecting (2-17 ms of each worker's start)."""
    calls: list[str] = []
    w = Worker(Config(), Registry(), settle=lambda: calls.append("settle"))
    monkeypatch.setattr(w, "open", lambda: calls.append("open") or ExitCode.OK)

    def threads() -> None:
        calls.append("threads")
        raise RuntimeError("stop here")

    monkeypatch.setattr(w, "start_threads", threads)
    try:
        with pytest.raises(RuntimeError, match="stop here"):
            w.run()
    finally:
        w.signals.close()
    assert calls == ["open", "settle", "threads"]


def test_the_workers_of_a_batch_but_the_first_wait_at_the_gate_until_all_are_forked():
    """The template forks a batch's workers (all the first workers at once) while the first of
    them starts; the others wait until the gate's write ends are closed (the template's after
    its last fork, each go-between's after its own), so they do not take the CPU from the
    forks still to come (the eighth worker was forked 160-230 ms after the first)."""
    import os
    import threading

    from worker.forked import _pass_gate

    read, write = os.pipe()
    held = os.dup(write)  # the template's end, while it forks the rest of the batch
    first = threading.Thread(target=_pass_gate, args=((os.dup(read), os.dup(write)), False))
    first.start()
    first.join(timeout=5)
    assert not first.is_alive()  # the batch's first worker goes at once
    later = threading.Thread(target=_pass_gate, args=((read, write), True))
    later.start()
    later.join(timeout=0.3)
    assert later.is_alive()  # waits while a write end is held
    os.close(held)  # the batch is forked
    later.join(timeout=5)
    assert not later.is_alive()
