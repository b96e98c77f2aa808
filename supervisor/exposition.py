"""The Prometheus text (format 0.0.4) that the metrics endpoint (``supervisor.metrics``) answers
a scrape with: :func:`exposition` reads the queue from a store and builds it with
:class:`Exposition` (``# HELP``/``# TYPE`` once per family, then its samples).

What is exported (``text/plain; version=0.0.4``):
- gauges read from the database at each scrape: jobs by status and type, scheduled jobs, the
  oldest due job's age, paused, the engine's own gauges, live and wanted workers;
- counters since this supervisor started its metrics: attempts ended (processed), completed,
  failed, retried, per type, and wait / run-time histograms, folded from ``job_attempts``;
- the supervisor's own counters: worker starts, restarts, crashes, jobs reaped.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shared.runtime.clock import parse_iso
from shared.settings.config import Config
from shared.engines.contract import OpsStore

if TYPE_CHECKING:
    from shared.ops.stats import AttemptFeed, Histogram
# The ops layer (what a scrape reads) is imported at the first scrape, not with this module: the
# supervisor imports this (through supervisor.metrics) before its first workers start.

DOCS = {
    "processed": "Job attempts that ended (any outcome), by type.",
    "completed": "Job attempts that completed, by type.",
    "failed": "Jobs that failed for good, by type.",
    "retried": "Job attempts that ended in a retry (pending again, the attempt counted), by type.",
    "workers": "Live worker processes of this supervisor.",
    "workers_target": "Worker processes this supervisor wants (config, --workers, scale).",
    "worker_starts": "Workers started in a slot for the first time.",
    "worker_restarts": "Workers started to replace one that exited (crash, recycle, timeout kill).",
    "worker_crashes": "Workers that exited abnormally without being told to.",
    "jobs_reaped": "Running jobs taken back from dead or killed workers (re-queued or failed).",
}


def exposition(
    store: OpsStore,
    now: float,
    feed: AttemptFeed | None,
    counters: dict[str, int],
    gauges: dict[str, float],
    started: float,
    config: Config | None = None,
) -> str:
    """The Prometheus text (format 0.0.4) of the queue as of ``now``; with the supervisor's
    ``config``, which named queues none of its pools serves."""
    from shared import ops  # here: see the imports

    out = Exposition()
    out.family("jobq_jobs", "gauge", "Jobs in the database by status and type.")
    for r in ops.counts_by_type(store):
        out.sample("jobq_jobs", r["n"], status=r["status"], type=r["type"])
    out.family("jobq_jobs_scheduled", "gauge", "Pending jobs not due yet, by type.")
    for job_type, n in sorted(ops.scheduled_by_type(store, now).items()):
        out.sample("jobq_jobs_scheduled", n, type=job_type)
    oldest = ops.oldest_due(store, now)
    age = max(now - parse_iso(max(oldest["run_at"], oldest["created_at"])), 0.0) if oldest else 0.0
    out.gauge(
        "jobq_oldest_pending_age_seconds", "How long the longest-waiting due job has waited.", age
    )
    out.gauge("jobq_paused", "1 while the queue is paused.", int(store.is_paused()))
    queue_gauges(out, store, now, config)
    for g in ops.gauges.read(store):  # the engine's own, as it names them (none: no family)
        out.gauge(f"jobq_{g['key']}", g["help"], g["value"])
    for name, value in sorted(gauges.items()):
        out.gauge(f"jobq_{name}", DOCS.get(name, f"Supervisor gauge {name}."), value)
    out.gauge(
        "jobq_metrics_start_time_seconds", "When these counters started (Unix time).", started
    )
    _attempt_counters(out, feed)
    for name, value in sorted(counters.items()):
        out.family(f"jobq_{name}_total", "counter", DOCS.get(name, f"Supervisor counter {name}."))
        out.sample(f"jobq_{name}_total", value)
    _histograms(out, feed)
    return out.text()


def queue_gauges(
    out: "Exposition", store: OpsStore, now: float, config: Config | None = None
) -> None:
    """Per named queue: due jobs waiting, running jobs, paused, and the pending jobs of a queue no
    pool of ``config`` serves (shared.ops.queues, shared.model.unserved)."""
    from shared.ops import queues  # here: see the imports

    rows = queues.by_queue(store, now, config, sample=0)
    for r in rows:
        r["unserved_pending"] = r["pending"] if r["unserved"] else 0
    for name, key, doc in (
        ("jobq_queue_due", "due", "Due pending jobs by named queue."),
        ("jobq_queue_running", "running", "Running jobs by named queue."),
        ("jobq_queue_paused", "paused", "1 while the named queue is paused."),
        (
            "jobq_queue_unserved_pending",
            "unserved_pending",
            "Pending jobs of a named queue no worker serves (0 while one does).",
        ),
    ):
        out.family(name, "gauge", doc)
        for r in rows:
            out.sample(name, int(r[key]), queue=r["queue"])


def _attempt_counters(out: "Exposition", feed: AttemptFeed | None) -> None:
    names = {"processed": None, "completed": "completed", "failed": "failed", "retried": "retry"}
    attempts = feed.totals.attempts if feed else {}
    types = sorted({t for t, _ in attempts})
    for name, outcome in names.items():
        metric = f"jobq_jobs_{name}_total"
        out.family(metric, "counter", DOCS[name])
        for t in types:
            n = sum(
                v
                for (tt, o), v in attempts.items()
                if tt == t and (outcome is None or o == outcome)
            )
            out.sample(metric, n, type=t)


def _histograms(out: "Exposition", feed: AttemptFeed | None) -> None:
    from shared.ops.stats import BOUNDS  # here: see the imports

    for metric, attr, doc in (
        ("jobq_job_wait_seconds", "wait", "From due (enqueued, or run_at) to start."),
        ("jobq_job_run_seconds", "run", "From start to end of an attempt."),
    ):
        out.family(metric, "histogram", doc)
        hists: dict[str, Histogram] = getattr(feed.totals, attr) if feed else {}
        for t, h in sorted(hists.items()):
            for bound, n in zip([*map(_num, BOUNDS), "+Inf"], h.buckets):
                out.sample(f"{metric}_bucket", n, type=t, le=bound)
            out.sample(f"{metric}_sum", h.sum, type=t)
            out.sample(f"{metric}_count", h.count, type=t)


class Exposition:
    """Builds the text: ``# HELP``/``# TYPE`` once per family, then its samples."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, doc: str) -> None:
        self.lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]

    def sample(self, name: str, value: float, **labels: Any) -> None:
        body = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
        self.lines.append(f"{name}{{{body}}} {_num(value)}" if body else f"{name} {_num(value)}")

    def gauge(self, name: str, doc: str, value: float) -> None:
        self.family(name, "gauge", doc)
        self.sample(name, value)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _num(v: float) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    return repr(float(v))
