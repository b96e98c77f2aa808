"""``python -m jobq [SUBCOMMAND]``: the ``jobq`` command (``supervisor.__main__:main``)."""

from __future__ import annotations

import sys


def main() -> int:
    from supervisor.cli import main as cli_main  # here: only the command needs the supervisor

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
