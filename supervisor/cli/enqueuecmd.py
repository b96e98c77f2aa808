"""``jobq enqueue``: one job from the command line, or many from a file of JSON lines (or
stdin), every line checked before any is written (exit 2 naming the line, nothing written), then
written in batches of ENQUEUE_BATCH. A workflow's parent (``--parent``) is named by id or prefix.
It works on the database directly, with or without a supervisor.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import warnings
from typing import Any, Iterator, TextIO

from shared.producer.api import JobQueue
from shared.model.bounds import MAX_DEPTH
from shared.settings.durations import parse_seconds
from shared.model.exitcodes import ExitCode
from supervisor.views.actions import (
    resolve_id,
)
from supervisor.views.context import Ctx
from shared.producer.typecheck import UnservedTypeWarning


ENQUEUE_BATCH = 1000
LINE_KEYS = (
    "type",
    "payload",
    "run_at",
    "delay",
    "priority",
    "max_attempts",
    "key",
    "unique",
    "queue",
    "limit_key",
)


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
        unique=args.unique,
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
    """The warnings of an enqueue that was written (an unserved type, a deduplicated job's
    options not applied), on stderr."""
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
