"""The job commands: ``jobs``, ``show``, ``retry``, ``cancel``, ``purge``, ``pause``, ``resume``
(``enqueue`` is :mod:`.enqueuecmd`). They work on the database directly, with or without a
supervisor.

Exit codes: 0 done; 2 bad arguments or input (nothing written); 10 (NOT_FOUND) when a job named
on the command line is missing or in a state the command does not apply to (the others named
are still acted on; for ``cancel --wait``, also a job that completed or failed before it
stopped); 1 when ``cancel --wait`` timed out with a job still running. The bulk writes show a
progress line on a terminal (:mod:`.progress`).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

from shared import ops
from shared.runtime.clock import iso
from shared.model.exitcodes import ExitCode
from shared.model.job import TERMINAL
from shared.ops import flows
from supervisor.views import render
from shared.ops.fragments import KEPT_WHY
from supervisor.views.actions import (
    Outcome,
    cancel_ids,
    ran_s,
    resolve_id,
    retry_ids,
    set_paused,
    unresolved,
)
from supervisor.views.context import Ctx
from shared.model.queuenames import queue_name_error

from .progress import Progress, wanted

MAX_LIST = 10_000_000  # `jobs --limit`: SQLite takes 64-bit integers; a larger number is a typo


def cmd_jobs(ctx: Ctx, args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_LIST:
        return ctx.fail(
            f"jobs: --limit must be from 1 to {MAX_LIST}, got {args.limit}", ExitCode.USAGE
        )
    with ctx.store() as store:
        rows = ops.list_jobs(store, args.status, args.type, args.limit)
    ctx.emit(rows, render.jobs_text(with_max(ctx, rows)))
    return ExitCode.OK


def cmd_show(ctx: Ctx, args: argparse.Namespace) -> int:
    with ctx.store() as store:
        job_id = resolve_id(store, args.id)
        if not isinstance(job_id, str):
            return ctx.fail(
                f"show {args.id}: {unresolved(job_id, 'no job has that id')}", ExitCode.NOT_FOUND
            )
        job = store.get(job_id)
        history = [dict(h, run_s=ran_s(h)) for h in ops.attempt_history(store, job_id)]
        rel = flows.relatives(store, job_id)
    data = dataclasses.asdict(job)
    ctx.emit(
        {"job": data, "attempts": history, **rel},
        render.job_text(with_max(ctx, [data])[0], history) + flows.relatives_text(rel),
    )
    return ExitCode.OK


def with_max(ctx: Ctx, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows as the text output shows them: a job enqueued without max_attempts shows the
    config's (``[types]``, else ``retry.max_attempts``): ``1/5``, not ``1/-``. A handler's own
    ``@handler(max_attempts=...)`` is not seen: listing jobs imports no handler module."""
    cfg = ctx.config
    return [
        r
        if r["max_attempts"]
        else dict(r, max_attempts=cfg.for_type(r["type"]).max_attempts or cfg.retry.max_attempts)
        for r in rows
    ]


# -- act on jobs ----------------------------------------------------------------------------------


def cmd_retry(ctx: Ctx, args: argparse.Namespace) -> int:
    if bool(args.ids) == bool(args.failed):
        return ctx.fail("retry: give job IDs, or --failed [--type T]", ExitCode.USAGE)
    if args.type is not None and not args.failed:
        return ctx.fail("retry: --type goes with --failed", ExitCode.USAGE)
    now = ctx.clock.now()
    with ctx.store() as store:
        if args.failed:
            total = ops.count_failed(store, args.type) if wanted(ctx) else None
            with Progress(ctx, "jobq retry", "jobs retried", total) as p:
                n = ops.retry_failed(store, now, args.type, p.update)
            of = f" of type {args.type}" if args.type else ""
            ctx.emit({"retried": n}, f"retried {n} failed jobs{of}")
            return ExitCode.OK
        outcome = retry_ids(store, args.ids, now)
    return _report(ctx, outcome)


WAIT_POLL = 0.1  # seconds between two looks at the jobs `cancel --wait` waits for


def cmd_cancel(ctx: Ctx, args: argparse.Namespace) -> int:
    if bool(args.ids) == bool(args.pending):
        return ctx.fail("cancel: give job IDs, or --pending [--type T]", ExitCode.USAGE)
    if args.type is not None and not args.pending:
        return ctx.fail("cancel: --type goes with --pending", ExitCode.USAGE)
    if args.timeout is not None and (not args.wait or args.timeout < 0):
        return ctx.fail("cancel: --timeout goes with --wait and is seconds >= 0", ExitCode.USAGE)
    if args.pending:
        return _cancel_pending(ctx, args.type, args.wait)
    with ctx.store() as store:
        with Progress(ctx, "jobq cancel", "jobs", len(args.ids)) as p:
            outcome = cancel_ids(store, args.ids, ctx.clock.now(), p.update)
        ended: dict[str, str] = {}
        timeout = args.timeout
        if args.wait and outcome.requested:
            if timeout is None:  # a handler that never looks is killed after cancel_grace
                timeout = ctx.config.worker.cancel_grace + ctx.config.supervisor.kill_grace + 10
            ended = _wait_ended(store, outcome.requested, timeout)
    return _report_cancel(ctx, outcome, ended, timeout if args.wait else None)


def _cancel_pending(ctx: Ctx, job_type: str | None, wait: bool) -> int:
    """``cancel --pending``: every pending or waiting job (of ``job_type``), in short batches."""
    if wait:
        return ctx.fail(
            "cancel: --wait goes with job IDs (--pending cancels no running job)", ExitCode.USAGE
        )
    with ctx.store() as store:
        total = ops.count_unstarted(store, job_type) if wanted(ctx) else None
        with Progress(ctx, "jobq cancel", "jobs cancelled", total) as p:
            n = ops.cancel_pending(store, ctx.clock.now(), job_type, p.update)
    of = f" of type {job_type}" if job_type else ""
    ctx.emit(
        {"cancelled": n},
        f"cancelled {n} pending or waiting jobs{of} (and their waiting dependants)",
    )
    return ExitCode.OK


def _wait_ended(store: Any, ids: list[str], timeout: float) -> dict[str, str]:
    """Poll until every job of ``ids`` has ended or ``timeout`` seconds passed; ``{id: status}``
    of those that ended (``deleted``: gone meanwhile)."""
    deadline = time.monotonic() + timeout
    while True:
        now = ops.statuses(store, ids)
        seen = {i: now.get(i, "deleted") for i in ids}
        ended = {i: s for i, s in seen.items() if s in (*TERMINAL, "deleted")}
        if len(ended) == len(ids) or time.monotonic() >= deadline:
            return ended
        time.sleep(min(WAIT_POLL, max(0.0, deadline - time.monotonic())))


def _report_cancel(ctx: Ctx, outcome: Outcome, ended: dict[str, str], waited: float | None) -> int:
    """``cancel``'s report: ended ``cancelled`` apart from only asked to stop; after ``--wait``
    (``waited``: its timeout), what became of each asked job (cancelled, finished first, or
    still running)."""
    done = outcome.done + [i for i, s in ended.items() if s == "cancelled"]
    first = {i: s for i, s in ended.items() if s != "cancelled"}
    still = [i for i in outcome.requested if i not in ended]
    shown = Outcome(outcome.verb, done, outcome.skipped, still)
    lines = shown.lines() + [
        f"job {i}: {s} before it stopped (asked to stop, its handler finished first)"
        for i, s in first.items()
    ]
    ctx.emit(
        {
            "cancelled": done,
            "requested": still,
            "finished_first": first,
            "skipped": outcome.skipped,
        },
        "\n".join(lines),
    )
    if not ctx.json and (outcome.skipped or first):
        every = len(done) + len(still) + len(first) + len(outcome.skipped)
        print(
            f"jobq: {len(outcome.skipped) + len(first)} of {every} jobs not cancelled", file=ctx.err
        )
    if waited is not None and still:
        return ctx.fail(
            f"{len(still)} jobs still running after {waited:g} s (asked to stop)", ExitCode.ERROR
        )
    return ExitCode.NOT_FOUND if outcome.skipped or first else ExitCode.OK


def _report(ctx: Ctx, outcome: Outcome) -> int:
    ctx.emit({outcome.verb: outcome.done, "skipped": outcome.skipped}, "\n".join(outcome.lines()))
    if outcome.skipped and not ctx.json:
        print(f"jobq: {outcome.summary()}", file=ctx.err)
    return ExitCode.NOT_FOUND if outcome.skipped else ExitCode.OK


def cmd_purge(ctx: Ctx, args: argparse.Namespace) -> int:
    now = ctx.clock.now()
    before = now - args.older_than
    with ctx.store() as store:
        total = None
        if wanted(ctx) and not args.dry_run:
            total = ops.purge(store, args.status, before, dry_run=True)
        with Progress(ctx, "jobq purge", "jobs deleted", total) as p:
            n = ops.purge(store, args.status, before, dry_run=args.dry_run, progress=p.update)
        kept = ops.kept_parents(store, args.status, before)
    verb = "would delete" if args.dry_run else "deleted"
    text = f"{verb} {n} {args.status} jobs that finished before {iso(before)}"
    if kept:
        text += f"; {'would keep' if args.dry_run else 'kept'} {kept}: {KEPT_WHY}"
    ctx.emit(
        {
            "status": args.status,
            "before": iso(before),
            "dry_run": args.dry_run,
            "deleted": n,
            "kept": kept,
            "kept_why": KEPT_WHY if kept else None,
        },
        text,
    )
    return ExitCode.OK


def cmd_pause(ctx: Ctx, args: argparse.Namespace) -> int:
    return _set_paused(ctx, True, args.queue)


def cmd_resume(ctx: Ctx, args: argparse.Namespace) -> int:
    return _set_paused(ctx, False, args.queue)


def _set_paused(ctx: Ctx, paused: bool, queue: str | None = None) -> int:
    why = None if queue is None else queue_name_error(queue)
    if why is not None:
        return ctx.fail(f"{'pause' if paused else 'resume'} --queue: {why}", ExitCode.USAGE)
    with ctx.store() as store:
        text = set_paused(store, paused, queue)
    ctx.emit({"paused": paused} if queue is None else {"paused": paused, "queue": queue}, text)
    return ExitCode.OK
