"""What the CLI and the dashboard do to jobs named by id: resolve an id or a unique prefix of
one, and retry, cancel, purge or pause with the same rules and messages in both programs
(``jobq retry ID...`` and the dashboard's buttons report the same :class:`Outcome`).

Exit-code and output policy stays with the callers; these functions only act and say what
happened. Each action is one call of the read layer's writes (one short transaction).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable

from shared import ops
from shared.runtime.clock import parse_iso
from shared.model.job import TERMINAL
from shared.ops.fragments import KEPT, KEPT_WHY

MIN_PREFIX = 4
MAX_MATCHES = 100  # an ambiguous prefix: how many matches are counted before "more than"


def resolve_id(store: Any, text: str) -> str | list[str] | None:
    """An exact id, else the one id starting with ``text`` (at least MIN_PREFIX characters);
    a list when several match (at most MAX_MATCHES + 1 of them); None when none does.
    Every command that names jobs and the dashboard resolve ids with this (or resolve_ids)."""
    if store.get(text) is not None:
        return text
    return _by_prefix(store, text)


def _by_prefix(store: Any, text: str) -> str | list[str] | None:
    if len(text) < MIN_PREFIX:
        return None
    found = ops.find_ids(store, text.lower(), limit=MAX_MATCHES + 1)
    if len(found) == 1:
        return found[0]
    return found or None


def resolve_ids(store: Any, texts: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """Resolve ids or unique prefixes as :func:`resolve_id` does, with one query for the exact
    ids: ``({text: id}, {text: why not})``, each in the order given, duplicates once."""
    texts = list(dict.fromkeys(texts))
    exact = ops.statuses(store, texts)
    found: dict[str, str] = {}
    missing: dict[str, str] = {}
    for text in texts:
        got = text if text in exact else _by_prefix(store, text)
        if isinstance(got, str):
            found[text] = got
        else:
            missing[text] = unresolved(got)
    return found, missing


def unresolved(found: list[str] | None, none: str = "no such job") -> str:
    """Why an id did not resolve: ``none`` when no job matches, else how many start with it."""
    if not found:
        return none
    many = f"more than {MAX_MATCHES}" if len(found) > MAX_MATCHES else str(len(found))
    return f"{many} jobs start with it: give more of the id"


def ran_s(h: dict[str, Any]) -> float | None:
    """How long an attempt of the history ran, in seconds; None when it never started."""
    if not h["started_at"]:
        return None
    return max(parse_iso(h["ended_at"]) - parse_iso(h["started_at"]), 0.0)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What an action on named jobs did: the ids acted on (``done``), the running jobs only asked
    to stop (``requested``: a cancel's; they end ``cancelled`` when their handler stops, unless
    they complete first), and why each other id was not acted on (``skipped``)."""

    verb: str
    done: list[str]
    skipped: dict[str, str]
    requested: list[str] = dataclasses.field(default_factory=list)

    def lines(self) -> list[str]:
        """The report, one line per job, as the CLI prints it and the dashboard shows it."""
        return (
            [f"{self.verb} {i}" for i in self.done]
            + [f"{ASKED} {i} ({ASKED_WHY})" for i in self.requested]
            + [f"job {i}: {why}" for i, why in self.skipped.items()]
        )

    def summary(self) -> str | None:
        """``N of M jobs not <verb>`` when some were skipped (how many were kept for the jobs
        waiting on them, and why), else None."""
        if not self.skipped:
            return None
        kept = sum(1 for why in self.skipped.values() if why == KEPT)
        note = f" (kept {kept}: {KEPT_WHY})" if kept else ""
        every = len(self.done) + len(self.requested) + len(self.skipped)
        return f"{len(self.skipped)} of {every} jobs not {self.verb}{note}"


ASKED = "asked to stop"
ASKED_WHY = "running: it ends cancelled when its handler stops, unless it completes first"


RETRY_RULE = "retry applies to failed or cancelled jobs"
CANCEL_RULE = "cancel applies to pending and running jobs"
PURGE_RULE = "purge applies to finished jobs (completed, failed or cancelled)"
PAUSED_TEXT = "paused: workers finish the job in hand and claim nothing until `jobq resume`"
RESUMED_TEXT = "resumed: workers claim jobs again"


def retry_ids(store: Any, ids: Iterable[str], now: float) -> Outcome:
    """Retry the named jobs, by id or unique prefix (the rules and messages of ``jobq retry ID...``)."""
    return _act(store, ids, "retried", lambda found: ops.retry_jobs(store, found, now), RETRY_RULE)


def cancel_ids(
    store: Any, ids: Iterable[str], now: float, progress: Callable[[int], None] | None = None
) -> Outcome:
    """Cancel the named jobs, by id or unique prefix (the rules and messages of ``jobq cancel
    ID...``): the pending and waiting ones ended ``cancelled`` (``done``) apart from the running
    ones only asked to stop (``requested``)."""
    found, skipped = resolve_ids(store, ids)
    wanted = list(dict.fromkeys(found.values()))
    each = ops.cancel_each(store, wanted, now, progress)
    done = [i for i, how in each.items() if how == "cancelled"]
    requested = [i for i, how in each.items() if how == "requested"]
    why = _why_not(store, wanted, list(each), lambda status: f"is {status}: {CANCEL_RULE}")
    return Outcome("cancelled", done, {**why, **skipped}, requested)


def purge_ids(store: Any, ids: Iterable[str]) -> Outcome:
    """Delete the named finished jobs and their attempt history (the dashboard's purge of a
    selection; ``jobq purge`` deletes by status and age)."""
    return _act(
        store,
        ids,
        "purged",
        lambda found: ops.purge_jobs(store, found),
        lambda status: KEPT if status in TERMINAL else f"is {status}: {PURGE_RULE}",
    )


def _act(
    store: Any,
    texts: Iterable[str],
    verb: str,
    act: Callable[[list[str]], list[str]],
    rule: str | Callable[[str], str],
) -> Outcome:
    """Resolve ``texts`` (:func:`resolve_ids`), act on the jobs found; an id that did not resolve
    is skipped with the reason, one the action did not apply to with ``rule`` (or ``rule(its
    status)``)."""
    found, skipped = resolve_ids(store, texts)
    ids = list(dict.fromkeys(found.values()))
    done = act(ids)
    why = rule if callable(rule) else (lambda status: f"is {status}: {rule}")
    return Outcome(verb, done, {**_why_not(store, ids, done, why), **skipped})


def set_paused(store: Any, paused: bool, queue: str | None = None) -> str:
    """Pause or resume the queue (or one named ``queue``); the message ``jobq pause``/``resume``
    prints."""
    if queue is not None:
        store.set_queue_paused(queue, paused)
        return (
            f"queue {queue!r} paused: workers finish the job in hand and claim none of its jobs until "
            f"`jobq resume --queue {queue}`"
            if paused
            else f"queue {queue!r} resumed"
        )
    store.set_paused(paused)
    return PAUSED_TEXT if paused else RESUMED_TEXT


def _why_not(
    store: Any, ids: Iterable[str], done: list[str], why: Callable[[str], str]
) -> dict[str, str]:
    """Why each of ``ids`` not in ``done`` was not acted on: ``why(its status)``, or missing."""
    rest = [i for i in dict.fromkeys(ids) if i not in set(done)]
    found = ops.statuses(store, rest)
    return {i: (why(found[i]) if i in found else "no such job") for i in rest}
