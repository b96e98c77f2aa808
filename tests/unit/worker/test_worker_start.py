"""A worker's start-up order on its own (issue 30): what it waits for, and when."""
from __future__ import annotations

import pytest

from shared.config import Config
from shared.exitcodes import ExitCode
from shared.handlers import Registry
from worker.loop import Worker


def test_a_forked_worker_waits_to_be_reparented_after_connecting_and_before_its_threads(monkeypatch):
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
