"""Controls that reach the supervisor by notification, and the slow reads that back them up.

A cancel of a running job and a ``jobq scale`` request are written by any host and notified
(``OpsAccess.notify_controls``) on a channel the supervisor's listening connection hears
(``Engine.relay``; PostgreSQL). While it listens (:attr:`Controls.watched`):

- a notification (or a new connection, which may have missed some) makes the loop run its
  upkeep round at once, and that round read what the readers would otherwise skip;
- the supervisor's own reads of controls, the scale request (``ops_requests``) and, on a
  follower whose workers hold nothing, the running jobs (``timeouts``: cancels, timeouts,
  this host's silent owners), run only when notified or every ``control_poll_interval``;
- its busy workers read their cancel requests only when told (``shared.runtime.controlfile``:
  the file is replaced at each notification) or every ``control_poll_interval``.

Why 10 s by default: a missed notification (a connection lost just then) then still reaches a
running job's handler within the default ``cancel_grace`` (10 s), before its worker is killed,
and a ``jobq scale`` within the time an operator waits for it; it costs 0.1 read per second per
host and per busy worker, where a busy worker read 4 a second before. Where nothing listens
(SQLite, pooled mode without ``[postgres] listen``, the connection down) every read is made
every round, as before, and the file is withdrawn, so workers read at each check-in.
"""

from __future__ import annotations

from shared.runtime import controlfile


class Controls:
    """The supervisor's side: is it told of controls now (:attr:`watched`), and is a reader due
    (:meth:`due`)?"""

    def __init__(self) -> None:
        self.watched = False
        self.generation = 0  # notifications heard (and connections made)
        self.seen: dict[str, int] = {}  # reader -> the generation it last read at
        self.next_at: dict[str, float] = {}  # reader -> monotonic time of its backstop read

    def heard(self, live: bool, notified: bool, folder: str) -> None:
        """After the loop's wait: ``live``, whether the connection listens; ``notified``, whether
        a control came (or may have been missed). Tells the workers through ``folder``'s file."""
        if not folder:
            return
        if notified:
            self.generation += 1
        if live and (notified or not self.watched):
            controlfile.poke(folder)
        elif not live and self.watched:
            controlfile.withdraw(folder)
        self.watched = live

    def due(self, reader: str, now_m: float, every: float) -> bool:
        """Should ``reader`` read now? Always while nothing listens; else once per notification,
        and every ``every`` seconds (``now_m``: monotonic) as a backstop."""
        if (
            self.watched
            and self.seen.get(reader) == self.generation
            and now_m < self.next_at.get(reader, 0.0)
        ):
            return False
        self.read(reader, now_m, every)
        return True

    def read(self, reader: str, now_m: float, every: float) -> None:
        """``reader`` reads now (for a reason of its own, or because :meth:`due` said so): what
        was notified so far is seen, and its backstop counts from now."""
        self.seen[reader] = self.generation
        self.next_at[reader] = now_m + every
