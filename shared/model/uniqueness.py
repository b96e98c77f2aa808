"""How long an idempotency key dedupes: a job's uniqueness scope (``unique=`` on ``enqueue``,
``enqueue_many`` items, ``@task`` and ``.using()``; docs/enqueueing.md, "Uniqueness").

A scope names the kept jobs of a key that a new enqueue of that key joins instead of adding a
job: ``"kept"`` (every job still kept, whatever its state, until retention deletes it: the
default, and what a key did before scopes), ``"pending"`` (a job not started yet: pending, or
waiting for its parents), ``"active"`` (pending or running), or a period (seconds, or a
duration like ``"10m"``: a job created less than that long ago, whatever its state). A kept job
of the key outside the scope gives its key up (the engine sets it to NULL, in the enqueue's
own transaction) and the new job takes it. Pure values and parsing; the engines' statement is
shared.engines.sql.uniquescope.

A key may also be left out: ``unique=`` without ``key=`` keys the job by its type and payload
(:func:`derived_key`), so two enqueues of one task with the same arguments are one job while
the scope holds (Oban's default of ``unique:``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from shared.model import bounds
from shared.settings.durations import SECONDS_EXPECTED, parse_seconds

DERIVED = "unique:"  # what a derived key starts with (:func:`derived_key`)
NOT_STARTED = ("waiting", "pending")
ACTIVE = ("waiting", "pending", "running")
NAMED = {"kept": None, "pending": NOT_STARTED, "active": ACTIVE}
EXPECTED = (
    '"pending", "active", "kept", or a period in seconds (a number, or ' + SECONDS_EXPECTED + ")"
)


@dataclass(frozen=True, slots=True)
class Unique:
    """A checked scope: ``name`` as given (for messages), the ``statuses`` a job of the key
    must have to be joined (None: any), and the ``period`` in seconds within which it must
    have been created (None: any time)."""

    name: str
    statuses: tuple[str, ...] | None = None
    period: float | None = None

    @property
    def frees(self) -> bool:
        """Can a kept job of the key fall outside the scope (so the enqueue may free its key)?
        False for ``"kept"``: then the key dedupes until the job is deleted."""
        return self.statuses is not None or self.period is not None


KEPT = Unique("kept")


def unique_scope(value: Any, owner: str = "enqueue") -> Unique | None:
    """The scope ``value`` names (None: not given); ValueError naming ``owner`` (the job type
    or task) and the value for anything else."""
    if value is None or isinstance(value, Unique):
        return value
    if isinstance(value, str) and value.strip().lower() in NAMED:
        name = value.strip().lower()
        return Unique(name, NAMED[name])
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = parse_seconds(value)
        except ValueError:
            seconds = -1.0
    else:
        seconds = -1.0
    if not seconds > 0 or seconds == float("inf"):
        raise ValueError(
            f"{owner}: unique= must be {EXPECTED}, got {bounds.safe_text(repr(value))}"
        )
    return Unique(value if isinstance(value, str) else f"{seconds:g}s", None, seconds)


def derived_key(jtype: str, payload_text: str) -> str:
    """The key of a job given ``unique=`` but no ``key=``: its type and a digest of its payload
    with the object keys sorted (so keyword arguments given in another order are the same
    job)."""
    canonical = json.dumps(json.loads(payload_text), sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]
    return f"{DERIVED}{jtype}:{digest}"
