"""The job model: a job as stored, and the value types the store contract exchanges.

Times cross the store boundary as Unix seconds (``now``, ``run_at``, marks); a :class:`Job`
shows its times as ISO-8601 UTC text (``2026-01-01T00:00:00.123Z``), which is part of the public
``JobQueue.get`` and ``jobq show`` output. How an engine stores them is its own business.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from shared.model import bounds
from shared.model.bounds import MAX_DEPTH
from shared.runtime.clock import iso
from shared.model.uniqueness import Unique

STATUSES = ("waiting", "pending", "running", "completed", "failed", "cancelled")
TERMINAL = ("completed", "failed", "cancelled")


def new_id() -> str:
    """A time-ordered 32-hex-digit id (48 bits of milliseconds, 80 random bits, like UUIDv7).

    Ids that grow with time keep inserts at the right edge of the primary-key B-tree.
    """
    return new_ids(1)[0]


def new_ids(n: int) -> list[str]:
    """``n`` ids as :func:`new_id` makes them, from one clock reading and one random read."""
    prefix = "%012x" % (int(time.time() * 1000) & 0xFFFFFFFFFFFF)
    rand = os.urandom(10 * n).hex()
    return [prefix + rand[i : i + 20] for i in range(0, 20 * n, 20)]


def _decode(text: str | None) -> tuple[Any, str | None]:
    """The decoded JSON and None; or, for a stored text no reader can decode (not JSON, or
    nested too deep for the interpreter: only a row written around ``enqueue`` can be), the raw
    text and why. Never raises: every reader of a row goes through here."""
    if text is None or text == "null":  # (no payload: most jobs; json.loads costs more)
        return None, None
    try:
        return json.loads(text), None
    except (ValueError, TypeError) as exc:
        return text, f"not valid JSON ({type(exc).__name__}: {exc})"
    except RecursionError:
        return text, (
            f"nested too deep to decode (RecursionError; enqueue accepts at most "
            f"{MAX_DEPTH} levels)"
        )


def decoded(text: str | None) -> Any:
    """Stored JSON text decoded (a progress); the raw text if it is not JSON, never raising."""
    return _decode(text)[0]


@dataclass
class Job:
    """A job as stored. ``payload`` and ``result`` are decoded JSON.

    If the stored payload is not valid JSON, ``payload`` holds the raw text and ``payload_error``
    says why; a worker fails such a job at once instead of retrying it.
    """

    id: str
    type: str
    status: str
    payload: Any
    result: Any
    error: str | None
    attempts: int
    max_attempts: int
    priority: int
    run_at: str
    started_at: str | None
    completed_at: str | None
    created_at: str
    updated_at: str
    key: str | None = None
    owner: str | None = None
    owner_pid: int | None = None
    heartbeat_at: str | None = None
    payload_error: str | None = None
    # the enqueuer's W3C trace context as JSON (shared.telemetry.tracing), or None
    trace: str | None = None
    queue: str = "default"  # the named queue it was enqueued on (docs/queues.md)
    cancel_requested_at: str | None = None  # when a cancel of the running job was asked
    progress: Any = None  # the last progress its handler reported (decoded JSON), or None
    limit_key: str | None = (
        None  # the key its per-key limits count it under (read with the row; None on the fast claim)
    )

    @classmethod
    def from_row(cls, row: Any) -> "Job":
        """Build from a mapping of field names (unknown names are ignored)."""
        d = dict(row)
        payload, perr = _decode(d.pop("payload"))
        result, _ = _decode(d.pop("result"))
        progress, _ = _decode(d.pop("progress", None))
        return cls(
            payload=payload,
            result=result,
            payload_error=perr,
            progress=progress,
            **{k: v for k, v in d.items() if k in _FIELDS},
        )

    @classmethod
    def from_values(cls, r: Sequence[Any]) -> "Job":
        """Build from the values of the fields ``id`` .. ``heartbeat_at`` in this class's field
        order, then ``trace`` (optional), ``payload`` and ``result`` as JSON text (an engine's
        hot path: no dict per row)."""
        text = r[3]
        payload, perr = (None, None) if text is None else _decode(text)  # (no call: most jobs)
        result = _decode(r[4])[0] if r[4] is not None else None
        return cls(
            r[0],
            r[1],
            r[2],
            payload,
            result,
            *r[5:18],
            payload_error=perr,
            trace=r[18] if len(r) > 18 else None,
            queue=r[19] if len(r) > 19 else "default",
        )

    @property
    def attempt(self) -> int:
        """The number of the attempt in progress (or the last one made)."""
        return self.attempts


_FIELDS = frozenset(Job.__dataclass_fields__)


# -- the value types the store contract exchanges (see shared.engines.contract)
# -----------------------------


@dataclass(slots=True)
class NewJob:
    """A validated job ready to insert (see :meth:`shared.producer.api.JobQueue.enqueue`).
    ``run_at``: Unix seconds."""

    id: str
    type: str
    payload: str
    priority: int
    run_at: float
    max_attempts: int | None
    #
    key: str | None
    trace: str | None = (
        None  # the W3C trace context to store (shared.telemetry.tracing.context), or None
    )
    queue: str = "default"  # the named queue (shared.model.queues)
    limit_key: str | None = None  # the key per-key limits count it under (shared.model.keys)
    after: tuple[str, ...] = ()  # the parents' ids, in order (workflows: shared.model.flows)
    after_failure: str | None = None  # the child's policy when a parent fails: cancel, run, hold
    # how long ``key`` dedupes (shared.model.uniqueness; None: while the job is kept)
    unique: Unique | None = None


@dataclass(frozen=True)
class Released:
    """What a store's ``release_owner`` did to one job."""

    id: str
    type: str
    status: str  # 'pending' (re-queued) or 'failed' (attempts used up)
    attempts: int


@dataclass(frozen=True)
class RunningGroup:
    """The running jobs of one owner and type, summed up by ``UpkeepStore.running_groups``."""

    owner: str | None
    type: str
    jobs: int
    first_start: str | None  # the earliest started_at (ISO text as stored)
    oldest_lease: float | None  # seconds since the least recently renewed lease (inf: unreadable)
    cancels: int  # jobs whose cancel was requested


def release_outcome(job: Job, limit: int, counts: bool) -> tuple[str, int]:
    """What releasing a running ``job`` of a dead or stopped owner makes of it: (status,
    attempts). When the interrupted run ``counts`` and used the last of ``limit`` attempts, the
    job fails; otherwise it is pending again, with the attempt given back unless it counts. A job
    whose cancel was requested ends ``cancelled`` (its worker was killed for it, or died)."""
    if job.cancel_requested_at is not None:
        return "cancelled", job.attempts
    if counts and job.attempts >= limit:
        return "failed", job.attempts
    return "pending", job.attempts if counts else max(job.attempts - 1, 0)


@dataclass(frozen=True)
class Finish:
    """An outcome to record for a running job (see a store's ``finish_and_claim``).

    ``kind``: 'completed' (``text`` is the JSON result or None), 'retry' (``text`` is the error,
    due again at ``run_at``, Unix seconds), 'failed' or 'cancelled' (``text`` is the error).

    ``started`` and ``ended``: when this job's own run began and ended (Unix seconds, the
    worker's clock), which the attempt history records; a batch's jobs each have their own.
    None: the claim time and the commit time stand in. ``ended`` is also how an outcome re-sent
    after an unknown commit recognises its committed row (see :func:`history_row`).

    ``progress``: the last progress its handler reported (JSON text), written with the outcome,
    so a report made just before the handler returned is kept; None keeps the stored one.

    ``trace``: for a retry, the job's trace context to store in place of the one it has (the
    enqueuer's, plus this attempt's own span: ``shared.telemetry.tracing.retried``), so the next
    attempt links to this one; None keeps the stored one.
    """

    kind: str
    job_id: str
    attempt: int
    text: str | None
    run_at: float = 0.0
    max_attempts: int | None = None
    started: float | None = None
    ended: float | None = None
    progress: str | None = None
    trace: str | None = None


def finish_times(
    f: Finish, stamp: str, text: Callable[[float], str] = iso
) -> tuple[str | None, str]:
    """The (started, ended) times an engine writes for ``f`` committed at ``stamp`` (ISO text):
    the run's own, else None (the claim time stays) and the commit time. ``text``: how a time
    is written (:func:`shared.runtime.clock.iso`, or a batch's
    :class:`shared.runtime.clock.IsoTimes`)."""
    return (
        None if f.started is None else text(f.started),
        stamp if f.ended is None else text(f.ended),
    )


def history_row(f: Finish, owner: str, text: str | None) -> tuple | None:
    """The attempt history's ``(job_id, attempt, outcome, owner, ended_at, error)`` that ``f``
    of ``owner`` leaves when it commits (``text``: its text as the engine stores it), or None
    for an outcome without its own end time, which nothing tells apart. Finding that row after
    the guarded update matched nothing means this very outcome committed before (a re-send
    after an unknown commit): it is recognised, not applied again. The supervisor's release of
    the same attempt writes its own reason and time, never this row."""
    if f.ended is None:
        return None
    return (
        f.job_id,
        f.attempt,
        f.kind,
        owner,
        iso(f.ended),
        None if f.kind == "completed" else text,
    )


def recognised(
    finishes: Sequence[Finish],
    done: list[bool],
    owner: str,
    history: Callable[[list[str]], Iterable[tuple]],
    text: Callable[[str | None], str | None] = lambda t: t,
) -> list[bool]:
    """``done`` (per finish: did its guarded update match), with True also for each outcome of
    ``owner`` whose update missed because it had committed before: ``history(job_ids)`` returns
    those jobs' history rows of ``owner`` as :func:`history_row` tuples (``text``: how the
    engine stores an outcome's text). Reads nothing when every update matched."""
    ids = sorted({f.job_id for f, ok in zip(finishes, done) if not ok and f.ended is not None})
    if not ids:
        return done
    seen = set(history(ids))
    return [ok or history_row(f, owner, text(f.text)) in seen for f, ok in zip(finishes, done)]


@dataclass(frozen=True)
class ScheduleMark:
    """What the database remembers of one schedule (``last_tick``: Unix seconds)."""

    fingerprint: str
    last_tick: float


# Immutable encoders built once: json.dumps with non-default options builds one per call.
_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_ENCODE_ASCII = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode


def encode_json(value: Any, what: str) -> str:
    """JSON-encode ``value`` as every reader can decode it (shared.model.bounds).

    A TypeError names ``what`` and the offending type; a ValueError says it is not valid JSON
    (NaN, infinity) or nests deeper than ``bounds.MAX_DEPTH`` levels. Text with lone surrogates
    (not valid Unicode, so not storable as UTF-8) is kept losslessly as ``\\udcxx`` escapes."""
    if value is None:
        return "null"  # the commonest payload and result; the encoder's slow path otherwise
    try:
        text = _ENCODE(value)
    except TypeError as exc:
        raise TypeError(f"{what} is not JSON-serialisable: {exc}") from None
    except RecursionError:
        raise ValueError(
            f"{what} nests deeper than {bounds.MAX_DEPTH} levels of arrays/objects (the limit)"
        ) from None
    except ValueError as exc:
        raise ValueError(f"{what} is not valid JSON: {exc}") from None
    if bounds.too_deep(text):
        raise ValueError(
            f"{what} nests deeper than {bounds.MAX_DEPTH} levels of arrays/objects (the limit)"
        )
    if not bounds.is_unicode(text):
        text = _ENCODE_ASCII(value)
    return text
