"""The candidate reads of a limited claim (:mod:`.limits`): the due pending jobs it may take,
in claim order, less the types with no room and the keys at their limit, and a fair type's
keyed jobs by turns of their keys (:mod:`.keys`).

Every read is sent before any answer is read (one round trip where the engine pipelines); where
the engine pipelines, a worker whose claims are steady sends them with the claim's state read
(:meth:`CandidatesSql._early_reads`), on the inputs its last claims found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence, Tuple

from shared.runtime.clock import iso
from .jobs import CLAIM_ORDER
from .keys import ROW, FairWalk, KeyCounts, KeysSql
from .limitstate import LimitedAsk, Now, read_now
from .queues import QUEUE_FREE, QueueServing

if TYPE_CHECKING:
    from shared.model.limits import TypeLimit

CANDIDATES_PER_SLOT = 4  # candidates read per job wanted, for batches that fill a type's room

# The claim order and index of the plain claim; types with no room are filtered out.
# A paused queue's jobs are skipped (QUEUE_FREE); a pool's worker takes only its queues' (_candidates).
# ``{n}``: the LIMIT as a literal, not a parameter: with it the generic plan of the prepared
# statement (the claim index, in order) costs what a custom one does, and PostgreSQL keeps it
# instead of planning every execution again (the same for ``id = :id`` in a one-job claim).
CANDIDATES = (
    f"SELECT {ROW} FROM jobs WHERE status = 'pending' AND run_at <= :now AND {QUEUE_FREE} "
    f"{{skip}}{CLAIM_ORDER} LIMIT {{n:d}}"
)

Reads = Callable[[Mapping[str, str]], list[dict[str, Any]]]  # given the turns read: the rows


class Inputs(NamedTuple):
    """What a claim's candidate reads take from its state: the types with no room (``full``),
    and each keyed type's keys at their limit (``at_limit``: (type, keys) pairs)."""

    full: Tuple[str, ...]
    at_limit: Tuple[Tuple[str, Tuple[str, ...]], ...]


class LastInputs(NamedTuple):
    """The inputs of a store's last limited claim: its ask's ``shape``, its ``inputs``, and
    whether the claim before it (of the same shape) found the same (``steady``)."""

    shape: tuple
    inputs: Inputs
    steady: bool


class EarlyReads(NamedTuple):
    """Candidate reads sent with the state read, and the ``inputs`` they were made on."""

    inputs: Inputs
    reads: Reads


def candidate_inputs(
    room: Mapping[str, float], keyed: Mapping[str, "TypeLimit"], counts: KeyCounts | None
) -> Inputs:
    """What a claim's candidate reads take from its state (:class:`Inputs`)."""
    full = tuple(t for t, n in room.items() if n <= 0)
    return Inputs(
        full,
        tuple((t, tuple(counts.full(lim))) for t, lim in keyed.items())
        if counts is not None
        else (),
    )


class CandidatesSql(KeysSql, QueueServing):
    """A limited claim's candidate reads, sent on its connection and read when it asks."""

    _reads_pipelined = False  # True where a claim's reads are pipelined: see _early_reads
    _last_inputs: LastInputs | None = None  # of the last claim (set per store as it claims)

    def _early_reads(
        self, c: Any, now: Now, ask: LimitedAsk, queue: str | None
    ) -> EarlyReads | None:
        """Where the engine pipelines (:attr:`_reads_pipelined`), the candidate reads sent at once,
        with the state read (before its answer: one round trip fewer), on the inputs
        (:func:`candidate_inputs`) the last two claims of this store of the same ``shape``
        both found; of the jobs due at the time read now (as a plain claim's: the time it was
        asked). None, or (those inputs, the reads): :meth:`_early_used` keeps them if the
        claim's own inputs are the same."""
        last = self._last_inputs
        if (
            not self._reads_pipelined
            or ask.ids is not None
            or last is None
            or last.shape != ask.shape
            or not last.steady
        ):
            return None
        return EarlyReads(
            last.inputs, self._candidates(c, ask, iso(read_now(now)), last.inputs, queue)
        )

    def _early_used(
        self, early: EarlyReads | None, ask: LimitedAsk, inputs: Inputs
    ) -> Reads | None:
        """The early reads if they were made on ``inputs`` (else None: the claim reads again);
        remembers ``inputs`` for the next claim, and whether they were the last claim's too."""
        last = self._last_inputs
        self._last_inputs = LastInputs(
            ask.shape,
            inputs,
            last is not None and last.shape == ask.shape and last.inputs == inputs,
        )
        return early.reads if early is not None and early.inputs == inputs else None

    def _candidates(
        self, c: Any, ask: LimitedAsk, stamp: str, inputs: Inputs, queue: str | None = None
    ) -> Reads:
        """Send the reads of the due pending jobs in claim order (``inputs``: the types with no
        room and the keys at their limit, left out), and of the fair types' turns
        (:meth:`_fair_candidates`); of ``queue`` alone when given, else of every queue this
        store serves. The returned function, given the turns the claim read, reads them merged."""
        fair = (
            [t for t, lim in ask.keyed.items() if lim.fair and t not in inputs.full]
            if ask.ids is None
            else []
        )  # ids: no turns
        skip, common, params = self._skips(ask, stamp, inputs, queue)
        # A fair type's keyed jobs come by turns (_fair_candidates), not in claim order; its keys
        # with room stay in this walk's window, so that the jobs behind them wait their turn in
        # claim order instead of the walk reading the whole backlog.
        # Every read is sent before any answer is read: one round trip where the engine pipelines.
        plain = self._run(
            c, CANDIDATES.format(skip=skip, n=ask.limit * CANDIDATES_PER_SLOT), params
        )
        at_limit = dict(inputs.at_limit)
        walks = [
            self._fair_candidates(
                c,
                FairWalk(ask.keyed[t], list(at_limit.get(t, ())), stamp, common, params),
                ask.limit,
            )
            for t in (fair if ask.types is None else [t for t in fair if t in ask.types])
        ]
        return _merged(plain, walks, fair)

    def _skips(
        self, ask: LimitedAsk, stamp: str, inputs: Inputs, queue: str | None
    ) -> tuple[str, str, dict[str, Any]]:
        """The candidate read's ``AND`` fragments (the types with no room, the ``types`` or
        ``ids`` asked, the queues, the keys at their limit), the queues' alone (``common``, for
        the fair walks too), and their parameters."""
        queues = [queue] if queue is not None else self.serving_names()
        common, params = self._filters([("queue", "queues", queues, False)], {"now": stamp})
        skip, params = self._filters(
            [
                ("type", "full", list(inputs.full) or None, True),
                ("type", "only", ask.types, False),
                ("id", "ids", ask.ids, False),
            ],
            params,
        )
        skip += common
        for i, (t, keys) in enumerate(inputs.at_limit):  # keys at their limit are stepped over
            if keys:
                where = self.dialect.any_of.format(
                    col="limit_key", param=f":k{i}_"
                )  # one list parameter
                skip += f"AND NOT (type = :kt{i} AND {where}) "
                params.update({f"k{i}_": self.dialect.list_param(keys), f"kt{i}": t})
        return skip, common, params

    def _filters(
        self, checks: list[tuple[str, str, Any, bool]], params: dict[str, Any]
    ) -> tuple[str, dict[str, Any]]:
        """``AND`` fragments for (column, parameter name, values or None, negate) and their parameters."""
        out, params = "", dict(params)
        for expr, name, values, negate in checks:
            if values is not None:
                where, more = self.dialect.member(expr, name, list(values), negate)
                out += f"AND {where} "
                params.update(more)
        return out, params


def _merged(plain: Any, walks: Sequence[Reads], fair: Sequence[str]) -> Reads:
    """The reads of one claim's candidates, merged once answered: the ``plain`` read in claim
    order (less the ``fair`` types' keyed jobs, which come by turns) and the fair ``walks``."""

    def rows(turns: Mapping[str, str]) -> list[dict[str, Any]]:
        out = [
            dict(r)
            for r in plain.fetchall()
            if not (r["type"] in fair and r["limit_key"] is not None)
        ]
        for walk in walks:
            out += walk(turns)
        if walks:
            out.sort(key=lambda r: (-r["priority"], r["run_at"], r["created_at"]))
        return out

    return rows
