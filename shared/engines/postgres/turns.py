"""Whose turn a new job is: one wake-up per job, not one per host.

Every enqueue sends one notification on the schema's channel, and every host's relay (the
supervisor's listening connection, :mod:`.relay`) hears it. Were each to wake its host's idle
lead, every host would run a claim transaction per job and all but one would find nothing: at
20 hosts x 2 workers a trickled job cost 135 server transactions and 17 ms from enqueue to
start. So the hosts take turns, with nothing but what each already holds:

- **Who listens.** Each relay's connection holds a session advisory lock on a slot number (the
  lowest free one: :data:`TAKE_SLOT`, no transaction) for as long as it listens; the lock dies
  with the session, so a dead or cut-off host drops out of the list by itself. A relay reads the
  held slots (:data:`VIEW`, ``pg_locks``) when it connects and, while notifications come, at
  most every :data:`REFRESH` seconds, and at once when a relay announces that it joined or
  left (:data:`JOINED`): its rank among them is its place in the turns.
- **Whose turn.** A one-job enqueue's notification carries a number (:func:`payload`: from the
  job id's random bits) and goes to one of :data:`LANES` channels, its *lane* (``number %
  LANES``, :func:`lane_channel`). With ``n`` relays listening, the relay ranked ``lane % n``
  has the turn and wakes its host's idle lead. Each relay listens only on its own lanes and on
  the lanes of the rank before it (it backs them up, below), so a job's notification reaches
  two hosts' supervisors, not every host's: at 20 hosts on two cores, twenty processes woken
  per job were most of a trickled job's latency. A notification on the schema's own channel
  (a batch, a retry, a released job, ``jobq retry``, a relay's pass, an older producer) reaches
  every relay and, without a number, wakes every host, as before: a burst wakes as many hosts
  as there are.
- **A busy host passes.** A relay whose host has no idle lead on its turn (nobody to claim:
  :mod:`.relay` sees the lead's marker) sends the turn on to the next rank (the payload's hop
  count, one NOTIFY in its own transaction); after every rank had it, the job waits for the
  first worker to free up, which claims at once.
- **Fallback.** The relay ranked next after the turn (it listens on that lane too) wakes its
  own lead :data:`FALLBACK` seconds later whatever happened (one empty claim when the turn was served): a host that died
  holding the turn, a relay whose view is stale, or a lead that claimed just before the job
  committed cost that much latency, never a job. Beyond it the relayed leads' slow backstop
  (``.wakeup.RELAYED_SLEEP``) still catches anything.

Why this design rather than per-host channels (b): a producer would have to know the hosts to
pick a channel (a read per enqueue, or a table to keep); here the producer only adds a number to
the notification it already sends, hosts join and leave by holding a lock, and all of the
choosing is in the listeners. Views of the list may disagree for up to :data:`REFRESH`
seconds after a host comes or goes; the fallback covers the gap (a lane whose two relays both
left before the others read the list again waits for the slow backstop: two hosts lost at
once). A relay missing from its own view listens on every lane. A worker without a relay
listens on every channel (:func:`channels`).
"""

from __future__ import annotations

import hashlib
import math
import zlib
from typing import Sequence

SLOTS = 1024  # slot numbers a relay may hold: more hosts than that just wake on everything
REFRESH = 2.0  # seconds a view of the listening relays is trusted while notifications come
FALLBACK = 0.05  # seconds after a notification the next-ranked relay wakes its host anyway
LANES = 64  # channels one-job notifications are spread over (hosts past that share the rest)
JOINED = "+"  # the payload of a relay that joined or left: every relay reads the list again
MAX_FALLBACKS = 4096  # pending fallbacks kept; past that a relay just wakes its host

# The lowest free slot, locked for the session. LIMIT 1 stops the scan at the first lock taken.
TAKE_SLOT = (
    "SELECT s FROM generate_series(0, %(n)s) s WHERE pg_try_advisory_lock(%(key)s::int4, s) LIMIT 1"
)
# The slots held by the listening relays of this schema (two-key advisory locks: objsubid 2).
VIEW = (
    "SELECT objid::int8 AS slot FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2 "
    "AND classid = %(key)s::int4::oid AND granted "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) ORDER BY 1"
)


def lock_key(schema: str) -> int:
    """The first key of the relays' slot locks for ``schema`` (31 bits of a hash of its name,
    apart from jobq's other advisory locks)."""
    return (
        int.from_bytes(hashlib.sha256(b"jobq relay\0" + schema.encode()).digest()[:4], "big") >> 1
    )


def payload(job_id: str) -> str:
    """The number a one-job enqueue's notification carries (its id's hash: the ids' random
    bits make the turns even)."""
    return str(zlib.crc32(job_id.encode()))


def lane_channel(channel: str, lane: int) -> str:
    """The channel of ``lane`` (0 to LANES - 1) of the one-job notifications of the schema
    whose own channel is ``channel`` (a hash of it: a channel name has at most 63 bytes)."""
    return f"jobq_l{lane}_{hashlib.sha256(channel.encode()).hexdigest()[:20]}"


def channels(channel: str) -> list[str]:
    """Every channel new jobs are notified on: the schema's own (``channel``), then its lanes."""
    return [channel, *(lane_channel(channel, lane) for lane in range(LANES))]


def lanes(channel: str) -> tuple[str, ...]:
    """The channels of every lane of the schema whose own channel is ``channel``, in lane order
    (named once per store: a one-job enqueue then picks its lane's name, no hash per call)."""
    return tuple(lane_channel(channel, lane) for lane in range(LANES))


def wake_one(lanes: Sequence[str], job_id: str) -> tuple[str, str]:
    """``wake(channel, [job_id])`` with the lanes' channels of ``channel`` (:func:`lanes`)."""
    number = zlib.crc32(job_id.encode())  # (payload(job_id), as a number)
    return lanes[number % LANES], str(number)


def wake(channel: str, job_ids: list[str]) -> tuple[str, str]:
    """(channel, payload) of the notification of new jobs ``job_ids``: one job's lane and
    number, or the schema's ``channel`` and no number for several (every host wakes)."""
    if len(job_ids) != 1:
        return channel, ""
    number = payload(job_ids[0])
    return lane_channel(channel, int(number) % LANES), number


def passed(base: int, hops: int) -> str:
    """The payload of a turn sent on: the same job's number and how many relays had it."""
    return f"{base}.{hops}"


def parse(text: str) -> tuple[int, int] | None:
    """(number, hops) of a payload; None for one that wakes every host (empty, or unknown)."""
    head, _, tail = text.partition(".")
    if not head.isdigit() or (tail and not tail.isdigit()):
        return None
    return int(head), int(tail or 0)


class Turns:
    """One relay's part in the turns (see the module): its slot, its view of the listening
    slots, and the fallbacks it owes. Pure bookkeeping: the relay runs the statements."""

    def __init__(self) -> None:
        self.slot: int | None = None  # the slot this relay's session holds (None: none yet)
        self.view: list[int] = []  # the slots held, sorted, as last read
        self.read_at = -math.inf  # when (monotonic) the view was read
        self.fallbacks: dict[int, tuple[float, int]] = {}  # number -> (when, hops)

    def joined(self, slot: int | None, view: list[int], now: float) -> None:
        """A new session took ``slot`` (None: none free) and read ``view``."""
        self.slot = slot
        self.seen(view, now)

    def seen(self, view: list[int], now: float) -> None:
        self.view, self.read_at = sorted(view), now

    def stale(self, now: float) -> bool:
        return now - self.read_at >= REFRESH

    @property
    def hosts(self) -> int:
        return len(self.view)

    def hear(self, text: str, now: float) -> tuple[int, int] | None | bool:
        """What a notification with payload ``text`` asks of this relay: True, wake this host
        (a notification for every host, or a view this relay is missing from); a (number, hops)
        pair, this host's turn; False, nothing now (perhaps a fallback later)."""
        turn = parse(text)
        if turn is None or self.slot is None or self.slot not in self.view:
            return True
        base, hops = turn
        n = len(self.view)
        rank = self.view.index(self.slot)
        at = (base % LANES + hops) % n
        if at == rank:
            self.fallbacks.pop(base, None)  # (passed on to us: our own fallback is this turn)
            return base, hops
        if (at + 1) % n == rank and base not in self.fallbacks:
            if len(self.fallbacks) >= MAX_FALLBACKS:
                return True
            self.fallbacks[base] = (now + FALLBACK, hops + 1)
        return False

    def lanes(self) -> set[int]:
        """The lanes this relay listens on: its turns and those of the rank before it (every
        lane while it is missing from its view)."""
        if self.slot is None or self.slot not in self.view:
            return set(range(LANES))
        n, rank = len(self.view), self.view.index(self.slot)
        return {lane for lane in range(LANES) if lane % n in (rank, (rank - 1) % n)}

    def due(self, now: float) -> list[tuple[int, int]]:
        """The fallbacks whose time came, as turns of this host (forgotten once returned)."""
        out = [(b, h) for b, (at, h) in self.fallbacks.items() if at <= now]
        for b, _ in out:
            del self.fallbacks[b]
        return out

    def next_due(self) -> float | None:
        """When the next fallback is due (monotonic), if one is owed."""
        return min((at for at, _ in self.fallbacks.values()), default=None)

    def may_pass(self, hops: int) -> bool:
        """Whether a turn that ``hops`` relays had may go on to the next (not back to the
        first: after every host had it, the job waits for a worker to free up)."""
        return hops + 1 < len(self.view)
