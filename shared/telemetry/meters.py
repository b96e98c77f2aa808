"""OpenTelemetry instruments mirroring the Prometheus metrics (supervisor/metrics.py), made by a
:class:`shared.telemetry.tracing.Tracing` once the application has imported
``opentelemetry.metrics`` (never imported here).

- ``jobq.jobs`` (counter, ``{job}``): runs by ``jobq.job.type`` and ``jobq.outcome``. With
  ``batched`` (a worker) the runs are tallied here and added per (type, outcome) when the
  owner's batch ends (:meth:`Meters.settle`), or 50 ms after the first run tallied, not by an
  SDK ``add`` per run (a third of the instruments' time per run); the totals are the same.
- ``jobq.job.duration`` and ``jobq.job.lag`` (histograms, seconds): run time, and due to
  started, by type. Nothing is recorded, or computed, until an SDK MeterProvider is set (also
  one set after the instruments were made: it is noticed within a second).
- ``jobq.queue.depth`` (gauge, ``{job}``): jobs in the database by ``jobq.job.status`` and
  ``jobq.job.type`` (Prometheus' ``jobq_jobs``), read at each collection from the counts the
  database keeps, where the owner gives a source (a worker: the one of slot 0).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator

from shared.runtime.clock import parse_iso

METRICS_MODULE = "opentelemetry.metrics"
SCOPE = "jobq"
QUEUE = "default"  # the queue of a job that names none, and of an enqueue span (docs/tracing.md)
SETTLE_AFTER = 0.05  # seconds: a batched tally is added at the latest this long after its first run


class Meters:
    """jobq's instruments in one process (see the module's docstring). ``metrics``: the
    ``opentelemetry.metrics`` module; ``depth``: a callable returning rows ``{type, status, n}``
    for the queue-depth gauge, or None; ``provider``: a MeterProvider to use instead of the
    global one."""

    def __init__(
        self,
        metrics: Any,
        depth: Callable[[], list[dict[str, Any]]] | None = None,
        provider: Any = None,
        batched: bool = False,
    ) -> None:
        self.metrics, self.provider = metrics, provider
        self.batched = batched
        self.tally: dict[tuple[str, str], int] = {}  # runs not added yet, by (type, outcome)
        self.since = 0.0  # perf_counter() of the first of them
        meter = metrics.get_meter(SCOPE, meter_provider=provider)
        self.runs = meter.create_counter(
            "jobq.jobs", unit="{job}", description="Job runs by type and outcome."
        )
        self.duration = meter.create_histogram(
            "jobq.job.duration", unit="s", description="Run time of jobs."
        )
        self.lag = meter.create_histogram(
            "jobq.job.lag", unit="s", description="Due to started, per job."
        )
        self.depth = depth
        self.sdk = False
        if depth is not None:
            meter.create_observable_gauge(
                "jobq.queue.depth",
                [self._observe_depth],
                unit="{job}",
                description="Jobs in the database by status and type.",
            )

    def record(self, job: Any, outcome: str, seconds: float) -> None:
        """Count a run, record its run time and its lag. Called once :meth:`live` said an SDK
        MeterProvider records them (the API's default one, a proxy until an SDK one is set,
        would drop them: :class:`shared.telemetry.tracing.Tracing` skips the call until then)."""
        labels = {"jobq.job.type": job.type, "jobq.outcome": outcome}
        if self.batched:
            key = (job.type, outcome)
            tally = self.tally
            if not tally:
                self.since = time.perf_counter()
            tally[key] = tally.get(key, 0) + 1
            if time.perf_counter() - self.since >= SETTLE_AFTER:
                self.settle()
        else:
            self.runs.add(1, labels)
        self.duration.record(seconds, labels)
        if job.started_at:  # ISO texts of one width order as times do: parse only the later one
            due = max(job.run_at, job.created_at)
            self.lag.record(
                max(parse_iso(job.started_at) - parse_iso(due), 0.0), {"jobq.job.type": job.type}
            )

    def settle(self) -> None:
        """Add the runs tallied since the last call to the counter (one ``add`` per type and
        outcome): the owner's batch ended, it goes idle or stops."""
        if self.tally:
            tally, self.tally = self.tally, {}
            for (jtype, outcome), n in tally.items():
                self.runs.add(n, {"jobq.job.type": jtype, "jobq.outcome": outcome})

    def live(self) -> bool:
        """Does an SDK MeterProvider record (not the API's proxy)? A provider is set once per
        process: once one is found it is kept. (Asking for the global provider reads the
        environment while none is set: the caller asks at most once a second.)"""
        if not self.sdk:
            provider = self.provider or self.metrics.get_meter_provider()
            self.sdk = type(provider).__name__ != "_ProxyMeterProvider"
        return self.sdk

    def _observe_depth(self, options: Any) -> Iterator[Any]:
        assert self.depth is not None
        for row in self.depth():
            yield self.metrics.Observation(
                row["n"],
                {
                    "jobq.job.status": row["status"],
                    "jobq.job.type": row["type"],
                    "messaging.destination.name": QUEUE,
                },
            )


def depth_reader(config: Any) -> Callable[[], list[dict[str, Any]]]:
    """The queue-depth gauge's source on ``config``'s database: each call (one per collection,
    in the SDK's thread) opens a store of its own, reads the counts per type and status the
    database keeps (no table scan), and closes it, so it shares no connection across threads."""

    def read() -> list[dict[str, Any]]:
        from shared import ops
        from shared.engines import open_store

        store = open_store(config)
        try:
            return ops.counts_by_type(store)
        finally:
            store.close()

    return read
