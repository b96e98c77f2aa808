"""The options of one job, as ``JobQueue.enqueue`` and an ``enqueue_many`` item give them.

:class:`Options` holds what was given (None: not given), and checks it once, when the job is built
(:func:`shared.producer.newjobs.template`): TypeError or ValueError with the messages
:meth:`shared.producer.api.JobQueue.enqueue` has always given, nothing written. Nothing here reads
the config or the store; the checks that depend on the job type live in ``newjobs``.

:func:`split_item` reads one ``enqueue_many`` item: ``(type, payload)``, ``(type, payload,
{options})`` or a mapping with ``type``, ``payload`` and options.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from itertools import repeat
from operator import is_, itemgetter
from typing import Any, Mapping, Sequence

from shared.model import bounds, flows
from shared.runtime.clock import to_timestamp

# A job's checked priority, run_at, max_attempts, key and after_failure (NewJob's order).
Checked = tuple[int, float, int | None, str | None, str | None]


@dataclass(frozen=True)
class Options:
    """What one job was given beyond its type and payload (each None when not given)."""

    run_at: Any = None
    delay: Any = None
    priority: Any = None
    max_attempts: Any = None
    key: Any = None
    queue: Any = None
    limit_key: Any = None
    after: Any = None
    after_failure: Any = None
    unique: Any = None  # how long ``key`` dedupes (shared.model.uniqueness)

    @classmethod
    def of(cls, given: Mapping[str, Any]) -> "Options":
        """The options among a call's arguments ``given`` (its ``locals()``: every name of
        :data:`NAMES` must be there): :data:`PLAIN` itself when none was given (most calls:
        no instance to build, and ``plain`` is then an identity test)."""
        given = _PICK(given)
        return PLAIN if all(map(is_, given, _NOTHING)) else cls(*given)

    @property
    def plain(self) -> bool:
        """Was nothing given? Then the job type's settings decide everything but the payload."""
        return self is PLAIN or all(map(is_, self.__dict__.values(), repeat(None)))

    def parents(self, ids: Sequence[str] = (), index: int | None = None) -> tuple[str, ...]:
        """``after`` as the parents' ids (in ``enqueue_many``, ``ids`` and ``index`` resolve an
        earlier item named by its index): see :func:`shared.model.flows.parent_ids`."""
        return flows.parent_ids(self.after, ids, index)

    def checked(self, jtype: Any, default_priority: int, now: float) -> Checked:
        """The job's ``priority`` (``default_priority`` when not given), ``run_at`` (a Unix
        time: ``now`` unless ``run_at`` or ``delay`` was given), ``max_attempts``, ``key`` and
        ``after_failure``, each checked; in the order the checks are made: priority,
        max_attempts, key, run_at, after_failure."""
        priority = _priority(jtype, default_priority if self.priority is None else self.priority)
        max_attempts = _max_attempts(jtype, self.max_attempts)
        key = _key(self.key)
        return priority, self.when(now), max_attempts, key, flows.policy(self.after_failure)

    def when(self, now: float) -> float:
        """When the job is due: ``now``, or ``run_at``, or ``delay`` seconds after ``now``."""
        run_at, delay = self.run_at, self.delay
        if run_at is not None and delay is not None:
            raise ValueError("give run_at or delay, not both")
        if delay is not None:
            if not isinstance(delay, (int, float)) or isinstance(delay, bool) or delay < 0:
                raise ValueError(f"delay must be a number of seconds >= 0, got {delay!r}")
            try:
                when = now + delay
            except OverflowError:  # an int too large for a float
                when = float("inf")
        elif run_at is not None:
            when = to_timestamp(run_at)
        else:
            when = now
        if bounds.time_error(when) is not None:
            # Stored times are fixed-width text (years 0001-9999): beyond that they misorder.
            raise ValueError(
                f"run_at must fall in the years 1 to 9999 (at the latest {bounds.MAX_TIME_TEXT}), "
                f"got {when!r} (run_at={run_at!r}, delay={delay!r})"
            )
        return when


PLAIN = Options()  # nothing given (frozen: shared by every plain job)
NAMES = tuple(f.name for f in dataclasses.fields(Options))
_PICK = itemgetter(*NAMES)  # a call's options out of its locals(), in field order, at C speed
_NOTHING = (None,) * len(NAMES)


def _priority(jtype: Any, priority: Any) -> int:
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise TypeError(f"priority must be an integer, got {priority!r}")
    # 32 bits: what every engine stores (PostgreSQL's integer columns), so that a job that
    # one engine takes another takes too (jobq copy, a move to a server).
    if not -(1 << 31) <= priority < (1 << 31):
        raise ValueError(
            f"job {jtype!r}: priority must fit in 32 bits (-2**31 to 2**31 - 1), got {priority!r}"
        )
    return priority


def _max_attempts(jtype: Any, max_attempts: Any) -> int | None:
    if max_attempts is not None and (
        not isinstance(max_attempts, int)
        or isinstance(max_attempts, bool)
        or not 1 <= max_attempts < (1 << 31)
    ):
        raise ValueError(
            f"job {jtype!r}: max_attempts must be an integer from 1 to 2**31 - 1, "
            f"got {max_attempts!r}"
        )
    return max_attempts


def _key(key: Any) -> str | None:
    if key is not None and (not isinstance(key, str) or not key or not bounds.is_unicode(key)):
        raise ValueError(
            f"key must be a non-empty string of valid Unicode, got {bounds.safe_text(repr(key))}"
        )
    return key


def split_item(index: int, item: Any) -> tuple[Any, Any, Options]:
    """Item ``index`` of an ``enqueue_many`` call as its type, payload and options; TypeError
    naming the item for any other shape or an unknown option."""
    if type(item) is tuple and len(item) == 2:  # (type, payload): the common case, fast
        return item[0], item[1], PLAIN
    if isinstance(item, Mapping):
        opts = dict(item)
        jtype, payload = opts.pop("type", None), opts.pop("payload", None)
    elif isinstance(item, Sequence) and not isinstance(item, str) and 1 <= len(item) <= 3:
        jtype = item[0]
        payload = item[1] if len(item) > 1 else None
        opts = dict(item[2]) if len(item) > 2 else {}
    else:
        raise TypeError(
            f"enqueue_many item {index}: expected (type, payload[, options]) or a mapping, "
            f"got {item!r}"
        )
    unknown = set(opts) - set(NAMES)
    if unknown:
        raise TypeError(f"enqueue_many item {index}: unknown options {sorted(unknown)}")
    return jtype, payload, Options(**opts)
