"""What a deduplicated enqueue says: when a job's ``key`` is held by a kept job inside its
uniqueness scope, the enqueue returns that job's id and applies nothing of its own (the kept
job is left as it is); if the call asked for something the kept job does not have (another
payload, priority, run_at, max_attempts, queue or limit key, or parents), a
:class:`DuplicateJobWarning` names each such option and the value the job keeps. A repeat of
the same call (the common idempotent retry) is silent.

A warning, not a flag on the result: ``enqueue`` returns a plain id (a ``str``) on every path,
and a team can turn the warning into an error (``-W error::jobq.DuplicateJobWarning``), log it
or filter it, as Python does for any warning.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Sequence

from shared.model.job import Job, NewJob, decoded
from shared.model.uniqueness import DERIVED
from shared.model.unserved import caller_level
from shared.runtime.clock import iso


class DuplicateJobWarning(UserWarning):
    """An enqueue found its key held by a kept job within its uniqueness scope: it returned
    that job's id and did not apply the options named in the message."""


def not_applied(new: NewJob, kept: Job, now: float) -> list[str]:
    """What of ``new`` (enqueued at ``now``) the kept job does not have, each as
    ``"option=value (the job keeps value)"``; empty for a repeat of the same call. A ``run_at``
    is compared only when the call scheduled its job later than ``now``."""
    out = []
    # a key made from the arguments (unique= without key=) holds only for the same arguments
    derived = new.key is not None and new.key.startswith(DERIVED)
    if not derived and decoded(new.payload) != kept.payload:
        out.append("payload (the job keeps its own)")
    pairs: list[tuple[str, Any, Any]] = [
        ("priority", new.priority, kept.priority),
        ("queue", new.queue, kept.queue),
    ]
    if new.run_at != now:
        pairs.append(("run_at", iso(new.run_at), kept.run_at))
    if new.max_attempts is not None:
        pairs.append(("max_attempts", new.max_attempts, kept.max_attempts))
    if new.limit_key is not None and kept.limit_key is not None:
        pairs.append(("limit_key", new.limit_key, kept.limit_key))
    out += [
        f"{name}={mine!r} (the job keeps {theirs!r})"
        for name, mine, theirs in pairs
        if mine != theirs
    ]
    if new.after:
        out.append(f"after={list(new.after)!r} (the job keeps its own parents)")
    return out


def message(new: NewJob, kept: Job, dropped: list[str]) -> str:
    """The warning's text: the key, the job holding it and its state, the scope, what was
    not applied."""
    scope = new.unique.name if new.unique is not None else "kept"
    return (
        f"job type {new.type!r}: key {new.key!r} is held by job {kept.id} ({kept.status}) "
        f"within unique={scope!r}: enqueue returned that job and did not apply "
        + "; ".join(dropped)
    )


def report(
    get: Callable[[str], Job | None], jobs: Sequence[NewJob], ids: Sequence[str], now: float
) -> None:
    """Warn (:class:`DuplicateJobWarning`) for each of ``jobs`` that the enqueue answered with
    another job's id (``ids``, in order) whose options differ; ``get`` reads a kept job."""
    for new, got in zip(jobs, ids):
        if got == new.id:
            continue
        kept = get(got)
        dropped = not_applied(new, kept, now) if kept is not None else []
        if dropped:
            warnings.warn(
                message(new, kept, dropped),  # type: ignore[arg-type]
                DuplicateJobWarning,
                stacklevel=caller_level(),
            )


def answered(jobs: Sequence[NewJob], ids: Sequence[str]) -> list[str]:
    """The ids of the jobs another job stood in for (read with the kept jobs, async paths)."""
    return [got for new, got in zip(jobs, ids) if got != new.id]
