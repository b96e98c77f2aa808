"""What tracing costs, run as the ``otel`` workload of ``python -m bench`` or alone:
``python -m bench.otel [--rounds 5] [--jobs 10000] [--workers 8]``. The targets: with the SDK
and the manual's sampler (``ParentBased(TraceIdRatioBased(0.01))``) a burn-down loses under 3%;
with the API alone no loss beyond noise; jobq's own cost per job beyond the SDK's span at most
10 us (see :mod:`bench.targets`).

Modes, set up in each worker by ``bench.handlers`` from ``JOBQ_BENCH_OTEL``:
``off`` (no OpenTelemetry imported), ``api`` (the API imported, no SDK: what an application
that installed the extra but set up no provider pays), ``sdk`` (the SDK as a production set-up
has it: a TracerProvider whose BatchSpanProcessor hands the spans to an exporter that drops them,
so the SDK's whole cost per span is paid, its export thread included, and no I/O: every span
recorded), ``sampled`` (the same with the manual's sampler: one trace in a hundred recorded).

- :func:`burns`: burn-downs of the modes alternated ``rounds`` times, the order rotated each round
  (off, api, sdk; api, sdk, off; ...) so that neither drifting load nor a place in the round
  favours a mode; each mode's loss is the median over rounds of its loss against ``off`` *in the
  same round* (and, steadier on a loaded machine, of the CPU of the supervisor's tree per job),
  with the spread of the rounds and the load average before and after.
- The same with one worker (:func:`run`): its CPU per job is the steadiest figure.
- :func:`micro`: in one process, per job, jobq's run path (``shared.execution.runner.execute`` with
  the worker's :class:`shared.telemetry.tracing.Tracing`) in each mode, beside the SDK's bare span
  (start with the same attributes, set the outcome, end; same processor and exporter): how much of
  the SDK mode's cost is the SDK's own; and jobq's own cost per job beyond that span
  (:func:`own`: jobq's span wrapper around a no-op run, less the bare span and the run).

The template process the workers are forked from must start no thread (jobq refuses to fork
it), and a BatchSpanProcessor starts one: the template sets the provider, and the processor is
made by the first span a worker ends, as docs/tracing.md tells applications to do."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from statistics import median
from typing import Any

MODES = ("off", "api", "sdk", "sampled")
SAMPLED = 0.01  # the manual's sampler: ParentBased(TraceIdRatioBased(0.01))


def setup(mode: str = "sdk") -> None:
    """``sdk``: set the global TracerProvider with a BatchSpanProcessor (made in the process that
    ends the first span: a thread must not cross the template's fork) and an exporter that drops
    every span; ``sampled``: the same with the manual's sampler. ``api``: import the API only.
    ``off`` (or ""): nothing."""
    if mode in ("", "off"):
        return
    from opentelemetry import trace

    if mode == "api":
        return
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans):  # noqa: ANN001 - the SDK's signature
            return SpanExportResult.SUCCESS

    class LazyBatch(SpanProcessor):
        """A BatchSpanProcessor of the process that ends spans (docs/tracing.md's set-up)."""

        inner, pid = None, 0

        def on_end(self, span):  # noqa: ANN001
            if self.pid != os.getpid():
                self.inner, self.pid = BatchSpanProcessor(Drop()), os.getpid()
            self.inner.on_end(span)

        def force_flush(self, timeout_millis: int = 30_000) -> bool:
            return self.inner is None or self.inner.force_flush(timeout_millis)

    if mode == "sampled":
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(SAMPLED)))
    else:
        provider = TracerProvider()
    if mode == "simple":  # not a mode of the comparison: a SimpleSpanProcessor, to compare by hand
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider.add_span_processor(SimpleSpanProcessor(Drop()))
    else:
        provider.add_span_processor(LazyBatch())
    trace.set_tracer_provider(provider)


def burn(folder: str, mode: str, workers: int, n: int) -> dict[str, Any]:
    """One burn-down of ``n`` no-op jobs with tracing in ``mode``; its rate (first start to
    last completion) and the CPU seconds of the supervisor's tree per job while it ran (the
    queue paused until every worker is up, so start-up is not counted)."""
    from . import jobq_runs
    from .procs import wait_for

    db = jobq_runs.as_db(folder)
    with jobq_runs.queue(db) as q:
        jobq_runs.fill(q, n)
        q.store.set_paused(True)
        with jobq_runs.start(
            db, "normal", workers, env={"JOBQ_BENCH_OTEL": "" if mode == "off" else mode}
        ) as tree:
            cpu0 = sum(tree.cpu_seconds().values())
            q.store.set_paused(False)
            q.store.wake_idle()
            wait_for(
                lambda: jobq_runs.unfinished(db) == 0, 60 + n / 100, "the burn-down", interval=0.05
            )
            cpu = sum(tree.cpu_seconds().values()) - cpu0
    out = jobq_runs.burn_window(db)
    out["cpu_us_per_job"] = round(cpu / n * 1e6, 1)
    return out


def burns(root: str, rounds: int, workers: int, n: int) -> dict[str, Any]:
    """The modes alternated ``rounds`` times, the order rotated each round (see the module's
    docstring)."""
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    load = [round(x, 2) for x in os.getloadavg()]
    for r in range(rounds):
        for mode in MODES[r % len(MODES) :] + MODES[: r % len(MODES)]:
            with tempfile.TemporaryDirectory(dir=root) as folder:
                runs[mode].append(burn(folder, mode, workers, n))
    out: dict[str, Any] = {
        "workers": workers,
        "jobs": n,
        "rounds": rounds,
        "loadavg_start": load,
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
    }
    for mode, rs in runs.items():
        out[mode] = {
            "per_s": median(r["per_s"] for r in rs),
            "runs": [r["per_s"] for r in rs],
            "cpu_us_per_job": median(r["cpu_us_per_job"] for r in rs),
            "cpu_runs": [r["cpu_us_per_job"] for r in rs],
        }
    for mode in MODES[1:]:
        # Each round's loss against the off run of the same round, then the median of those
        losses = [100 * (1 - a["per_s"] / b["per_s"]) for a, b in zip(runs[mode], runs["off"])]
        cpu = [
            100 * (1 - b["cpu_us_per_job"] / a["cpu_us_per_job"])
            for a, b in zip(runs[mode], runs["off"])
        ]
        out[mode].update(
            loss_pct=round(median(losses), 1),
            losses=[round(x, 1) for x in losses],
            cpu_loss_pct=round(median(cpu), 1),
            cpu_losses=[round(x, 1) for x in cpu],
        )
    return out


def micro(mode: str, n: int = 20_000, rounds: int = 5) -> dict[str, float]:
    """Per job, in this process (fresh: run it in a child per mode): jobq's run path of a no-op
    job in ``mode``, best of ``rounds``; in ``sdk`` mode also the SDK's bare span of it."""
    setup(mode)
    from shared.execution.handlers import ATTR, Registry, handler
    from shared.model.job import Job
    from shared.execution.runner import JobContext, execute
    from shared.telemetry.tracing import Tracing

    noop = handler("bench:noop")(lambda payload, job: None)
    registry, tracing = Registry([getattr(noop, ATTR)]), Tracing()
    stamp = "2026-01-01T00:00:00.000000Z"
    jobs = [
        Job(
            id=f"{i:032x}",
            type="bench:noop",
            status="running",
            payload=None,
            result=None,
            error=None,
            attempts=1,
            max_attempts=3,
            priority=0,
            run_at=stamp,
            started_at=stamp,
            completed_at=None,
            created_at=stamp,
            updated_at=stamp,
        )
        for i in range(n)
    ]
    ctx = JobContext("x", "bench:noop", 1, 3)
    out = {"run_us": _best(lambda: [execute(registry, j, ctx, tracing) for j in jobs], n, rounds)}
    if mode in ("sdk", "sampled"):  # sampled: the SDK's bare span is one its sampler drops
        out["bare_span_us"] = _best(lambda: _bare_spans(jobs), n, rounds)
        out.update(own(jobs, rounds, sampled=mode == "sdk"))
    if mode == "sdk":
        out["metered_run_us"] = _best(_metered(registry, jobs, ctx), n, rounds)
    return out


def own(jobs: list[Any], rounds: int = 5, sampled: bool = True) -> dict[str, float]:
    """jobq's own cost per job beyond the SDK's span, with the same tracer provider and processor:
    jobq's span wrapper (:meth:`shared.telemetry.tracing.Tracing.consume`) around a run that only
    returns its outcome, less the SDK's bare span (:func:`_bare_spans`) and the run alone; best of
    ``rounds``, the three loops alternated within each round. ``own_us``: jobs enqueued under no
    span (as the burn-downs'); ``own_stored_us``: each job with a stored context of its own (a
    child span of it, the context parsed per job; ``sampled``: whether the stored contexts say
    their trace is sampled, as the bare spans are, or not: a ParentBased sampler follows them)."""
    import dataclasses

    from shared.execution.runner import Outcome
    from shared.telemetry.tracing import Tracing

    tracing = Tracing(metered=False)
    flags = "01" if sampled else "00"
    stored = [
        dataclasses.replace(j, trace=f'{{"traceparent":"00-{i + 1:032x}-{i + 1:016x}-{flags}"}}')
        for i, j in enumerate(jobs)
    ]

    def wrapped(batch: list[Any]) -> Any:
        def go() -> None:
            consume = tracing.consume
            for j in batch:
                consume(j, lambda: Outcome("completed"))

        return go

    def alone() -> None:
        for _j in jobs:
            (lambda: Outcome("completed"))()

    loops = {
        "wrapped": wrapped(jobs),
        "stored": wrapped(stored),
        "bare": lambda: _bare_spans(jobs),
        "alone": alone,
    }
    loops["wrapped"]()  # the tracer and the processor's thread are made before any timing
    best = dict.fromkeys(loops, float("inf"))
    for _ in range(rounds):
        for name, fn in loops.items():
            best[name] = min(best[name], _best(fn, len(jobs), 1))
    base = best["bare"] + best["alone"]
    return {
        "own_us": round(best["wrapped"] - base, 2),
        "own_stored_us": round(best["stored"] - base, 2),
    }


def _metered(registry: Any, jobs: list[Any], ctx: Any) -> Any:
    """The run path with the SDK's meters too (a MeterProvider whose reader is only read at the
    end), through a worker's :class:`shared.telemetry.tracing.Tracing` (runs counted per batch of
    64)."""
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from shared.execution.runner import execute
    from shared.telemetry.tracing import worker_tracing

    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    tracing = worker_tracing(None, None)
    settle = getattr(
        tracing, "settle", lambda: None
    )  # (a tree from before runs were counted per batch)

    def go() -> None:
        for i, j in enumerate(jobs):
            execute(registry, j, ctx, tracing)
            if i % 64 == 63:
                settle()
        settle()

    return go


def _bare_spans(jobs: list[Any]) -> None:
    """The SDK's span of each job and nothing of jobq's: start it with the attributes jobq sets,
    set the outcome, end it (the exporter drops it)."""
    from opentelemetry import trace
    from opentelemetry.context import Context

    tracer = trace.get_tracer_provider().get_tracer("bench")
    for j in jobs:
        span = tracer.start_span(
            "process bench:noop",
            context=Context(),
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "messaging.system": "jobq",
                "messaging.operation": "process",
                "messaging.destination.name": "default",
                "messaging.message.id": j.id,
                "jobq.job.type": j.type,
                "jobq.attempt": 1,
            },
        )
        span.set_attribute("jobq.outcome", "completed")
        span.end()


def _best(fn: Any, n: int, rounds: int) -> float:
    """CPU microseconds per job of ``fn`` (``n`` jobs), the best of ``rounds``: CPU time, not
    wall time, so that other processes of a loaded machine count less."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return round(best / n * 1e6, 2)


def micros(n: int = 20_000) -> dict[str, dict[str, float]]:
    """:func:`micro` of each mode, each in a fresh child process (nothing imported carries over)."""
    from .procs import REPO, child_env

    out = {}
    for mode in MODES:
        r = subprocess.run(
            [sys.executable, "-m", "bench.otel", "--micro", mode, "--jobs", str(n)],
            capture_output=True,
            text=True,
            cwd=REPO,
            env=child_env(JOBQ_BENCH_OTEL=""),
            timeout=300,
            check=True,
        )
        out[mode] = json.loads(r.stdout)
    return out


def run(root: str, rounds: int, workers: int, n: int, micro_jobs: int = 20_000) -> dict[str, Any]:
    """The whole measurement: alternated burn-downs (``workers``, then one worker), then the
    micro-benchmarks. One worker's CPU per job is the steadiest figure on a loaded machine: no
    worker waits for, or races, another for the CPU and the claims (the target is judged on the
    burn-down of ``workers``)."""
    out = {"burn": burns(root, rounds, workers, n)}
    if workers != 1:
        out["burn1"] = burns(root, min(rounds, 3), 1, n)
    out["micro"] = micros(micro_jobs)
    return out


def report(r: dict[str, Any]) -> str:
    from .targets import sdk_floor

    b, m = r["burn"], r["micro"]
    lines = [
        f"Tracing cost: burn-down of {b['jobs']:,} no-op jobs, modes alternated {b['rounds']} times, order "
        f"rotated (medians; a loss is against tracing off in the same round); load average "
        f"{b['loadavg_start'][0]} at start, {r.get('burn1', b)['loadavg_end'][0]} at end"
    ]
    for burn in (b, r.get("burn1")):
        if burn is None:
            continue
        lines.append(f"{burn['workers']} worker(s):")
        for mode in MODES:
            loss = (
                f", loss {burn[mode]['loss_pct']}% (rounds {burn[mode].get('losses', [])}; from CPU per job: "
                f"{burn[mode]['cpu_loss_pct']}%, rounds {burn[mode].get('cpu_losses', [])})"
                if "loss_pct" in burn[mode]
                else ""
            )
            lines.append(
                f"- {mode}: {burn[mode]['per_s']:,.0f} jobs/s (runs {burn[mode]['runs']}), "
                f"{burn[mode]['cpu_us_per_job']} us CPU/job{loss}"
            )
    lines.append(
        "CPU per job in one process (best of 5): jobq's run path "
        + ", ".join(f"{mode} {m[mode]['run_us']} us" for mode in MODES)
        + f"; the SDK's bare span alone {m['sdk']['bare_span_us']} us = "
        f"{100 * m['sdk']['bare_span_us'] / b['off']['cpu_us_per_job']:.1f}% of jobq's "
        f"{b['off']['cpu_us_per_job']} us CPU per job (tracing off), so a CPU-bound burn-down "
        f"loses at least {sdk_floor({'otel': r}):.0f}% to the SDK whatever jobq does; with the "
        f"SDK's meters too, jobq's run path {m['sdk'].get('metered_run_us', '?')} us"
    )
    for mode in ("sdk", "sampled"):
        lines.append(
            f"{mode}: jobq's own cost per job beyond the SDK's span (same processor, one "
            f"process): {m[mode].get('own_us', '?')} us (no stored context), "
            f"{m[mode].get('own_stored_us', '?')} us (a stored context of its own); the SDK's "
            f"bare span {m[mode].get('bare_span_us', '?')} us"
        )
    for burn in (b, r.get("burn1")):
        if burn is not None:
            lines.append(
                f"The SDK's cost inside a job ({burn['workers']} worker(s), the tree's CPU per job "
                f"against tracing off): every span recorded {sdk_cost(burn, 'sdk')} us, "
                f"the manual's sampler {sdk_cost(burn, 'sampled')} us"
            )
    return "\n".join(lines)


def sdk_cost(burn: dict[str, Any], mode: str) -> float:
    """What ``mode`` adds to the CPU of a job in a burn-down (medians), in microseconds."""
    return round(burn[mode]["cpu_us_per_job"] - burn["off"]["cpu_us_per_job"], 1)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.otel", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--jobs", type=int, default=10_000, help="jobs per burn-down (with --micro: per round)"
    )
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--micro", choices=MODES, help=argparse.SUPPRESS)  # one mode's micro, as JSON
    args = p.parse_args(argv)
    if args.micro:
        print(json.dumps(micro(args.micro, args.jobs)))
        return 0
    from . import targets

    with tempfile.TemporaryDirectory(prefix="jobq-otel-") as root:
        r = run(root, args.rounds, args.workers, args.jobs)
    print(report(r))
    print(targets.markdown(targets.otel_targets({"otel": r})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
