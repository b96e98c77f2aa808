"""The PostgreSQL engine: jobq's store on a PostgreSQL server, shared by many hosts.

Only :mod:`shared.engines` (the factory) imports this package; the only psycopg imports of
jobq's runtime are here. It needs the ``postgres`` extra (psycopg 3).

- :mod:`.store`: :class:`PgStore`, producers', workers' and the supervisor's statements
- :mod:`.lifecycle`: schedules, retention and per-type limits; :mod:`.dialect`: its spellings for the shared SQL
- :mod:`.connection`: connecting, reconnecting, errors; :mod:`.schema`: tables, migrations
- :mod:`.wakeup`: how idle workers learn of new jobs (LISTEN/NOTIFY)
- :mod:`.upkeep`: the periodic work the supervisor runs for this engine
"""
from .store import PgStore
from .upkeep import upkeep_tasks

__all__ = ["PgStore", "upkeep_tasks"]
