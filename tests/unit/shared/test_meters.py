"""shared.telemetry.meters: jobq's instruments, on a metrics module of the test's own that
records what the instruments are given."""

from __future__ import annotations

from types import SimpleNamespace

from shared.telemetry import meters
from shared.telemetry.meters import Meters


class Instrument:
    def __init__(self, name):
        self.name, self.calls = name, []

    def add(self, n, labels):
        self.calls.append((n, labels))

    def record(self, value, labels):
        self.calls.append((value, labels))


class Meter:
    def __init__(self):
        self.gauges = {}

    def create_counter(self, name, **kw):
        return Instrument(name)

    create_histogram = create_counter

    def create_observable_gauge(self, name, callbacks, **kw):
        self.gauges[name] = callbacks[0]


class Metrics:
    """The parts of ``opentelemetry.metrics`` that Meters uses."""

    def __init__(self, provider_name="_ProxyMeterProvider"):
        self.meter = Meter()
        self.provider = type(provider_name, (), {})()

    def get_meter(self, scope, meter_provider=None):
        assert scope == "jobq"
        return self.meter

    def get_meter_provider(self):
        return self.provider

    @staticmethod
    def Observation(value, attributes):
        return (value, attributes)


def job(
    started_at="2026-01-01T00:00:05.000Z",
    run_at="2026-01-01T00:00:02.000Z",
    created_at="2026-01-01T00:00:01.000Z",
):
    return SimpleNamespace(type="send", started_at=started_at, run_at=run_at, created_at=created_at)


def test_unbatched_runs_are_counted_at_once_with_duration_and_lag():
    m = Meters(Metrics())
    m.record(job(), "completed", 0.25)
    labels = {"jobq.job.type": "send", "jobq.outcome": "completed"}
    assert m.runs.calls == [(1, labels)] and m.duration.calls == [(0.25, labels)]
    assert m.lag.calls == [(3.0, {"jobq.job.type": "send"})]  # due at run_at, started 3 s later


def test_lag_counts_from_creation_when_that_was_later_and_is_never_negative():
    m = Meters(Metrics())
    m.record(
        job(run_at="2026-01-01T00:00:00.000Z", created_at="2026-01-01T00:00:04.000Z"), "failed", 1
    )
    m.record(job(started_at="2026-01-01T00:00:00.000Z"), "failed", 1)
    m.record(job(started_at=None), "failed", 1)
    assert [v for v, _ in m.lag.calls] == [1.0, 0.0]


def test_batched_runs_are_tallied_and_settled_per_type_and_outcome(monkeypatch):
    monkeypatch.setattr(meters, "SETTLE_AFTER", 3600.0)
    m = Meters(Metrics(), batched=True)
    for outcome in ("completed", "completed", "failed"):
        m.record(job(), outcome, 0.1)
    assert m.runs.calls == [] and len(m.duration.calls) == 3
    m.settle()
    assert sorted((n, labels["jobq.outcome"]) for n, labels in m.runs.calls) == [
        (1, "failed"),
        (2, "completed"),
    ]
    m.settle()
    assert len(m.runs.calls) == 2


def test_a_tally_older_than_the_settle_time_is_added_by_the_next_run(monkeypatch):
    monkeypatch.setattr(meters, "SETTLE_AFTER", 0.0)
    m = Meters(Metrics(), batched=True)
    m.record(job(), "completed", 0.1)
    assert m.runs.calls == [(1, {"jobq.job.type": "send", "jobq.outcome": "completed"})]
    assert m.tally == {}


def test_live_only_once_an_sdk_provider_is_set_and_then_for_good():
    metrics = Metrics()
    m = Meters(metrics)
    assert not m.live()
    metrics.provider = type("MeterProvider", (), {})()
    assert m.live()
    metrics.provider = type("_ProxyMeterProvider", (), {})()
    assert m.live()


def test_the_depth_gauge_reads_its_source_at_each_collection():
    metrics = Metrics()
    rows = [{"type": "send", "status": "pending", "n": 4}]
    Meters(metrics, depth=lambda: rows)
    observe = metrics.meter.gauges["jobq.queue.depth"]
    assert list(observe(None)) == [
        (
            4,
            {
                "jobq.job.status": "pending",
                "jobq.job.type": "send",
                "messaging.destination.name": "default",
            },
        )
    ]
    bare = Metrics()
    Meters(bare)  # no source: no gauge
    assert bare.meter.gauges == {}
