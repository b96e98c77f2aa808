"""supervisor.unserved: one ``queue.unserved`` warning per unserved queue with pending jobs or a
table, once per config (what is unserved: tests/behaviour/test_queues.py)."""

from __future__ import annotations

import logging

from shared.ops import queues
from supervisor import unserved
from supervisor.unserved import UnservedLog


class Config:
    def __init__(self, tables):
        self.queues = tables


def test_each_config_is_looked_at_once_and_only_unserved_queues_that_matter_are_logged(monkeypatch):
    reads, logged = [], []
    rows = [
        {"queue": "news", "pending": 2, "unserved": True},
        {"queue": "empty", "pending": 0, "unserved": True},
        {"queue": "tabled", "pending": 0, "unserved": True},
        {"queue": "default", "pending": 5, "unserved": False},
    ]
    monkeypatch.setattr(
        queues, "by_queue", lambda store, now, config, sample: reads.append(config) or rows
    )
    monkeypatch.setattr(
        unserved,
        "event",
        lambda log, name, level, **f: logged.append(
            (name, level, f["queue"], f["pending"], f["note"])
        ),
    )
    log, first = UnservedLog(), Config({"tabled": object()})
    log.check("store", first, 0.0)
    log.check("store", first, 1.0)
    assert reads == [first]
    assert logged == [
        ("queue.unserved", logging.WARNING, "news", 2, "no worker serves queue news: 2 pending"),
        (
            "queue.unserved",
            logging.WARNING,
            "tabled",
            0,
            "no worker serves queue tabled: 0 pending",
        ),
    ]
    log.check("store", Config({}), 2.0)  # a reload: looked at again
    assert len(reads) == 2 and len(logged) == 3
