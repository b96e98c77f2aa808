"""``python -m supervisor [SUBCOMMAND]`` and the ``jobq`` console script.

A plain ``run`` command line (``[run] [--config P] [--workers N] [--queues A,B] [--json]``) is
read here and goes straight to the supervisor process (``supervisor.launch``) with nothing but
the modules it needs: the CLI's parser imports every command (the ops layer, the config
reference, the dashboard's launcher), which the first job does not wait for.
Anything else (another command, ``--help``, an argument or value this reader does not take)
goes to the full CLI (``supervisor.cli``), which gives the same result and the same messages.
"""

from __future__ import annotations

import sys

VALUED = ("--config", "--workers", "--queues", "--ready-fd")
INTS = ("--workers", "--ready-fd")


def main(argv: list[str] | None = None) -> int:
    """The ``jobq`` / ``python -m supervisor`` entry point; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = run_options(argv)
    if opts is None:
        from .cli.main import main as cli_main  # here: only other commands need the CLI

        return cli_main(argv)
    from .launch import run

    return run(
        opts.get("--config"), opts.get("--workers"), opts.get("--queues"), opts.get("--ready-fd")
    )


def run_options(argv: list[str]) -> dict | None:
    """The options of a plain ``run`` command line (``--config`` and ``--json`` may stand before
    ``run``), or None when the full CLI must read ``argv``."""
    opts: dict = {}
    seen_run = False
    k = 0
    while k < len(argv):
        a = argv[k]
        name, eq, value = a.partition("=")
        if a == "run" and not seen_run:
            seen_run = True
        elif a == "--json":
            pass
        elif name in VALUED and name not in opts:
            if not eq:
                k += 1
                if k >= len(argv):
                    return None
                value = argv[k]
            if name in INTS:
                try:
                    value = int(value)
                except ValueError:
                    return None
            opts[name] = value
        else:
            return None
        k += 1
    return opts


if __name__ == "__main__":
    sys.exit(main())
