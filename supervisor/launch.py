"""``jobq run`` in the supervisor process: read the config, check the overrides, run the arbiter.
Reached from the plain ``run`` command line by ``supervisor.__main__`` without the ops CLI's
parser, and from the CLI's ``run`` command; both give the same messages.

The worker template is forked here, before the arbiter's own modules (the upkeep, the ops
layer, the metrics server, ...) are imported: the template imports the worker loop and the
handler modules while the supervisor imports those and opens the database, instead of after
(a faster start). What both processes need (the config, the engine and its driver) is imported
before the fork, once.
"""

from __future__ import annotations

import sys

from shared.settings import config as config_mod
from shared.settings.config import ConfigError
from shared.execution.asyncjobs import config_async
from shared.model.exitcodes import ExitCode
from shared.model.queuenames import queue_name_error


def run(config: str | None, workers: int | None, queues: str | None, ready_fd: int | None) -> int:
    """``jobq run``: load the config, check the overrides, run the supervisor in this process."""
    try:
        cfg = config_mod.load(config_mod.resolve_path(config))
    except ConfigError as exc:
        print(f"jobq: invalid config: {exc}", file=sys.stderr)
        return ExitCode.CONFIG_INVALID
    if workers is not None and workers < 0:
        print(f"jobq: --workers must be >= 0, got {workers}", file=sys.stderr)
        return ExitCode.USAGE
    names = None
    if queues is not None:
        names = tuple(q.strip() for q in queues.split(",") if q.strip())
        bad = (
            next((why for q in names if (why := queue_name_error(q))), None)
            if names
            else "no queue named"
        )
        if bad:
            print(f"jobq: --queues {queues!r}: {bad}", file=sys.stderr)
            return ExitCode.USAGE
    from . import spawner

    early = spawner.Spawner()
    early.begin(
        tuple(cfg.handlers),
        cfg.database,
        cfg.path,
        log=(cfg.log_level, cfg.log_format),
        async_types=config_async(cfg),
    )
    from .arbiter import Arbiter  # here: imported while the template starts (see above)

    return Arbiter(cfg, workers=workers, queues=names, ready_fd=ready_fd, spawner=early).run()
