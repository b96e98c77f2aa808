"""``python -m bench.huey_consumer --db PATH --fsync default|off --out DIR -w N``

What ``huey_consumer bench.app.huey -k process -w N`` does (its ConsumerConfig with Huey's
defaults, its logger set-up: INFO to stderr, or WARNING with ``-q``), with the SqliteHuey built
here from the command line instead of imported from a module-level instance.
"""

from __future__ import annotations

import argparse
import logging
import sys

from .huey_app import FSYNC, make_huey


def main(argv: list[str] | None = None) -> int:
    from huey.consumer_options import ConsumerConfig

    p = argparse.ArgumentParser(prog="python -m bench.huey_consumer")
    p.add_argument("--db", required=True)
    p.add_argument("--fsync", choices=sorted(FSYNC), default="default")
    p.add_argument("--out", required=True, help="folder for the workers' timing records")
    p.add_argument("--pg-schema", help="--db is a PostgreSQL URL: a PostgresHuey in this schema")
    p.add_argument("--each", action="store_true", help="write each timing record at once")
    p.add_argument("-w", "--workers", type=int, default=1)
    p.add_argument("-q", "--quiet", action="store_true")
    args = p.parse_args(argv)
    huey, _ = make_huey(args.db, args.fsync, args.out, args.each, args.pg_schema)
    config = ConsumerConfig(
        workers=args.workers, worker_type="process", verbose=False if args.quiet else None
    )
    config.validate()
    config.setup_logger(logging.getLogger("huey"))
    huey.create_consumer(**config.values).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
