"""The job model: one row of the ``jobs`` table as a Python object."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

from .bounds import MAX_DEPTH

STATUSES = ("pending", "running", "completed", "failed", "cancelled")
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
    return [prefix + rand[i:i + 20] for i in range(0, 20 * n, 20)]


def _decode(text: str | None) -> tuple[Any, str | None]:
    """The decoded JSON and None; or, for a stored text no reader can decode (not JSON, or
    nested too deep for the interpreter: only a row written around ``enqueue`` can be), the raw
    text and why. Never raises: every reader of a row goes through here."""
    if text is None:
        return None, None
    try:
        return json.loads(text), None
    except (ValueError, TypeError) as exc:
        return text, f"not valid JSON ({type(exc).__name__}: {exc})"
    except RecursionError:
        return text, (f"nested too deep to decode (RecursionError; enqueue accepts at most "
                      f"{MAX_DEPTH} levels)")


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

    @classmethod
    def from_row(cls, row: Any) -> "Job":
        """Build from a mapping of column names (unknown columns are ignored)."""
        d = dict(row)
        payload, perr = _decode(d.pop("payload"))
        result, _ = _decode(d.pop("result"))
        return cls(payload=payload, result=result, payload_error=perr,
                   **{k: v for k, v in d.items() if k in _FIELDS})

    @classmethod
    def from_tuple(cls, r: tuple) -> "Job":
        """Build from a row of ``shared.store``'s job columns, in field order (the claim's
        hot path: no per-row dict)."""
        payload, perr = _decode(r[3])
        result = _decode(r[4])[0] if r[4] is not None else None
        return cls(r[0], r[1], r[2], payload, result, *r[5:18], payload_error=perr)

    @property
    def attempt(self) -> int:
        """The number of the attempt in progress (or the last one made)."""
        return self.attempts


_FIELDS = frozenset(Job.__dataclass_fields__)
