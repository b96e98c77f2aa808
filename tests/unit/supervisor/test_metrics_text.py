"""supervisor.exposition: the Prometheus text format; supervisor.metrics: the request line (the
endpoint served by a running supervisor: tests/process/test_metrics.py; its gauges on a store:
tests/unit/cli/test_status_display.py)."""

from __future__ import annotations

import pytest

from supervisor import exposition, metrics
from supervisor.exposition import Exposition


def test_families_samples_and_labels():
    out = Exposition()
    out.family("jobq_jobs", "gauge", "Jobs by status.")
    out.sample("jobq_jobs", 3, status="pending", type="send")
    out.gauge("jobq_paused", "1 while paused.", True)
    assert out.text() == (
        "# HELP jobq_jobs Jobs by status.\n# TYPE jobq_jobs gauge\n"
        'jobq_jobs{status="pending",type="send"} 3\n'
        "# HELP jobq_paused 1 while paused.\n# TYPE jobq_paused gauge\njobq_paused 1\n"
    )


def test_label_values_are_escaped():
    out = Exposition()
    out.sample("m", 1, type='a"b\\c\nd')
    assert out.lines == ['m{type="a\\"b\\\\c\\nd"} 1']


@pytest.mark.parametrize(
    "value, text",
    [(0, "0"), (7, "7"), (False, "0"), (1.5, "1.5"), (2.0, "2.0"), (float("inf"), "inf")],
)
def test_numbers(value, text):
    assert exposition._num(value) == text


@pytest.mark.parametrize(
    "raw, line",
    [
        (b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", ("GET", "/metrics")),
        (b"HEAD / HTTP/1.0\n", ("HEAD", "/")),
        (b"GET\r\n", ("", "")),
        (b"", ("", "")),
        (b"\xff\xfe /x", ("\xff\xfe", "/x")),
    ],
)
def test_request_line(raw, line):
    assert metrics._request_line(raw) == line
