"""Structured log lines: one record per event, or one record for a batch of them (``events``)
that jobq's formatters still write as one line per entry."""

from __future__ import annotations

import io
import json
import logging

import pytest

from shared.runtime import logs


@pytest.fixture
def capture():
    def make(fmt):
        buf = io.StringIO()
        logs.setup("info", fmt, buf)
        return buf

    yield make
    logs.setup("info", "text")


def test_text_event_and_batch_of_events(capture):
    buf = capture("text")
    log = logs.get_logger("worker")
    logs.event(log, "job.retry", logging.INFO, id="a", error="two words", delay=1.5)
    logs.events(
        log, "job.completed", logging.INFO, [{"id": "b", "attempt": 1}, {"id": "c", "attempt": 2}]
    )
    logs.events(log, "job.completed", logging.INFO, [])  # nothing to say: no line
    lines = buf.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[0].split(" ", 2)[1:] == ["INFO", 'job.retry id=a error="two words" delay=1.5']
    assert lines[1].endswith(" INFO job.completed id=b attempt=1")
    assert lines[2].endswith(" INFO job.completed id=c attempt=2")
    assert lines[1].split(" ")[0] == lines[2].split(" ")[0]  # the batch's one timestamp


def test_json_batch_of_events_is_one_object_per_line(capture):
    buf = capture("json")
    log = logs.get_logger("worker")
    logs.events(
        log, "job.completed", logging.INFO, [{"id": "b", "slot": None}, {"id": "c", "slot": 3}]
    )
    objs = [json.loads(x) for x in buf.getvalue().splitlines()]
    assert [(o["event"], o["level"], o["id"], o.get("slot")) for o in objs] == [
        ("job.completed", "info", "b", None),
        ("job.completed", "info", "c", 3),
    ]


def test_batch_below_the_level_builds_nothing(capture):
    buf = capture("text")
    logs.setup("warning", "text", buf)
    logs.events(logs.get_logger("worker"), "job.completed", logging.INFO, [{"id": "b"}])
    assert buf.getvalue() == ""
