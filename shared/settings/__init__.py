"""The configuration and what it describes: ``jobq.toml`` read and validated (``config``)
from key declarations (``schema``) and its tables (``sections``), durations and rates
(``durations``), cron (``cron``), recurring jobs (``schedule``) and retention (``retention``).

Named ``settings``, not ``config``: ``shared.config`` is the configuration module's old path,
which still imports (shared/_moved.py).
"""
