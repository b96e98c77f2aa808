"""The SQLite engine: jobq's store on one SQLite file in WAL mode.

Only :mod:`shared.engines` (the factory) imports this package; the rest of jobq sees the
protocols of :mod:`shared.contract`. The only ``sqlite3`` imports of jobq's runtime are here.

- :mod:`.store`: :class:`SqliteStore`, producers', workers' and the supervisor's statements
- :mod:`.lifecycle`: schedules, retention and per-type limits; :mod:`.dialect`: its spellings for the shared SQL
- :mod:`.connection`: opening, pragmas, busy retries, errors; :mod:`.schema`: tables, migrations
- :mod:`.wakeup`, :mod:`.walwatch` (and :mod:`shared.engines.idlelead`): how idle workers learn of new jobs
- :mod:`.upkeep`: the WAL checkpoint task the supervisor runs
"""
from .store import SqliteStore

__all__ = ["SqliteStore"]
