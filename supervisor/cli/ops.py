"""The job commands: ``enqueue``, ``jobs``, ``show``, ``retry``, ``cancel``, ``purge``,
``pause``, ``resume``. They work on the database directly, with or without a supervisor.

Exit codes: 0 done; 2 bad arguments or input (nothing written); 10 (NOT_FOUND) when a job named
on the command line is missing or in a state the command does not apply to (the others named
are still acted on; for ``cancel --wait``, also a job that completed or failed before it
stopped); 1 when ``cancel --wait`` timed out with a job still running. The bulk writes show a
progress line on a terminal (:mod:`.progress`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import sys
import time
import warnings
from typing import Any, Iterator, TextIO

from shared import ops
from shared.producer.api import JobQueue
from shared.model.bounds import MAX_DEPTH
from shared.runtime.clock import iso
from shared.settings.durations import parse_seconds
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
from shared.producer.typecheck import UnservedTypeWarning

from .progress import Progress, wanted

ENQUEUE_BATCH = 1000
LINE_KEYS = ("type", "payload", "run_at", "delay", "priority", "max_attempts", "key")
MAX_LIST = 10_000_000  # `jobs --limit`: SQLite takes 64-bit integers; a larger number is a typo


# -- enqueue --------------------------------------------------------------------------------------


def cmd_enqueue(ctx: Ctx, args: argparse.Namespace) -> int:
    if args.file is not None:
        if args.type is not None:
            return ctx.fail("enqueue: give TYPE [JSON] or --file, not both", ExitCode.USAGE)
        return _enqueue_file(ctx, args.file, args.traceparent)
    if args.type is None:
        return ctx.fail(
            "enqueue: give a job TYPE (and a JSON payload), or --file jobs.jsonl", ExitCode.USAGE
        )
    try:
        payload = None if args.payload is None else json.loads(args.payload)
    except RecursionError:
        return ctx.fail(
            f"enqueue {args.type}: the payload nests too deep to decode (the limit is "
            f"{MAX_DEPTH} levels)",
            ExitCode.USAGE,
        )
    except ValueError as exc:
        return ctx.fail(
            f"enqueue {args.type}: the payload is not valid JSON ({exc}): {args.payload!r}",
            ExitCode.USAGE,
        )
    with _queue(ctx) as (q, caught):
        try:
            job_id = _enqueue_one(q, args, payload)
        except (TypeError, ValueError) as exc:
            return ctx.fail(f"enqueue {args.type}: {exc}", ExitCode.USAGE)
    _warn(ctx, caught)
    ctx.emit({"id": job_id}, job_id)
    return ExitCode.OK


def _enqueue_one(q: JobQueue, args: argparse.Namespace, payload: Any) -> str:
    """The id of the job the arguments describe, enqueued (TypeError or ValueError if the
    queue refuses them)."""
    after = [_parent_id(q.store, a) for a in args.after or ()]
    return q.enqueue(
        args.type,
        payload,
        run_at=args.run_at,
        delay=args.delay,
        priority=args.priority,
        max_attempts=args.max_attempts,
        key=args.key,
        traceparent=args.traceparent,
        queue=args.queue,
        after=after,
        after_failure=args.after_failure,
    )


def _parent_id(store: Any, text: str) -> str:
    """``--after``'s id or unique prefix, as ``show`` takes it (else as given: the enqueue then
    refuses it, naming it)."""
    found = resolve_id(store, text)
    return found if isinstance(found, str) else text


def _enqueue_file(ctx: Ctx, path: str, traceparent: str | None = None) -> int:
    """JSON lines, one job object each; all validated before any is written, then written in
    transactions of ``ENQUEUE_BATCH``; ``traceparent`` is stored with each of them."""
    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            items, lines = read_job_lines(sys.stdin, name)
        else:
            with open(path, encoding="utf-8") as f:
                items, lines = read_job_lines(f, name)
    except OSError as exc:
        return ctx.fail(f"enqueue --file {name}: {exc.strerror}", ExitCode.USAGE)
    except ValueError as exc:
        return ctx.fail(f"enqueue --file {exc} (nothing was written)", ExitCode.USAGE)
    with _queue(ctx) as (q, caught):
        try:
            ids = q.enqueue_many(items, batch_size=ENQUEUE_BATCH, traceparent=traceparent)
        except (TypeError, ValueError) as exc:
            m = re.match(r"enqueue_many item (\d+): (.*)", str(exc), re.S)
            where = (
                f"{name}: line {lines[int(m.group(1))]}: {m.group(2)}" if m else f"{name}: {exc}"
            )
            return ctx.fail(f"enqueue --file {where} (nothing was written)", ExitCode.USAGE)
    _warn(ctx, caught)
    ctx.emit({"ids": ids}, "\n".join(ids) if ids else None)
    print(f"enqueued {len(ids)} jobs from {name}", file=ctx.err)
    return ExitCode.OK


@contextlib.contextmanager
def _queue(ctx: Ctx) -> Iterator[tuple[JobQueue, list[warnings.WarningMessage]]]:
    """A queue that checks each job type against the config's handler modules: a type none
    serves is refused (``strict_types``: ValueError, exit 2) or warned about; the warnings are
    collected for :func:`_warn`, so that a refused enqueue prints its one error line alone."""
    with (
        JobQueue(config=ctx.config, clock=ctx.clock).check_types() as q,
        warnings.catch_warnings(record=True) as caught,
    ):
        warnings.simplefilter("always", UnservedTypeWarning)
        yield q, caught


def _warn(ctx: Ctx, caught: list[warnings.WarningMessage]) -> None:
    """The unserved-type warnings of an enqueue that was written, on stderr."""
    for w in caught:
        print(f"jobq: warning: {w.message}", file=ctx.err)


def read_job_lines(f: TextIO, name: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Job mappings from JSON lines (blank lines skipped) and the line number of each.
    ``delay`` may be seconds or a duration string. Raises ValueError naming the line."""
    items, lines = [], []
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except RecursionError:
            raise ValueError(
                f"{name}: line {n}: nests too deep to decode (the limit is {MAX_DEPTH} levels)"
            ) from None
        except ValueError as exc:
            raise ValueError(f"{name}: line {n}: not valid JSON ({exc})") from None
        if not isinstance(obj, dict) or "type" not in obj:
            raise ValueError(
                f'{name}: line {n}: expected a JSON object with a "type", got {line.strip()[:80]!r}'
            )
        unknown = sorted(set(obj) - set(LINE_KEYS))
        if unknown:
            raise ValueError(
                f"{name}: line {n}: unknown keys {unknown} (known: {', '.join(LINE_KEYS)})"
            )
        if isinstance(obj.get("delay"), str):
            try:
                obj["delay"] = parse_seconds(obj["delay"])
            except ValueError as exc:
                raise ValueError(f"{name}: line {n}: delay {exc}") from None
        items.append(obj)
        lines.append(n)
    return items, lines


# -- inspect --------------------------------------------------------------------------------------


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
