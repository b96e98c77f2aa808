"""``python manage.py jobq run|status|web [ARGS...]``: the ``jobq`` command with this project's
settings and the task backend's jobq config.

The process becomes ``python -m jobq SUBCOMMAND --config <the backend's config> ARGS...`` (exec:
the same process, signals and exit code as the ``jobq`` command), with
``DJANGO_SETTINGS_MODULE`` set and the project's folder on ``PYTHONPATH``, so the workers'
``jobq.django.worker`` sets up this project and its task modules import.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

SUBCOMMANDS = ("run", "status", "web")


class Command(BaseCommand):
    help = "Run jobq's supervisor (run), its status, or its dashboard (web) with this project's settings."
    requires_system_checks: list[
        str
    ] = []  # `run` checks its config itself; status must work regardless

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("subcommand", choices=SUBCOMMANDS)
        parser.add_argument(
            "--backend",
            default="default",
            help="the TASKS alias of the jobq backend (default: default)",
        )
        parser.add_argument("rest", nargs=argparse.REMAINDER, help="passed to the jobq command")

    def handle(
        self, *args: Any, subcommand: str, backend: str, rest: list[str], **options: Any
    ) -> None:
        argv, env = command_line(subcommand, backend, rest)
        from django.db import connections

        connections.close_all()
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, argv, env)


def command_line(subcommand: str, alias: str, rest: list[str]) -> tuple[list[str], dict[str, str]]:
    """The ``python -m jobq`` argv and environment for ``manage.py jobq SUBCOMMAND``."""
    from jobq.django import compat
    from jobq.django.backend import JobqBackend

    try:
        backend = compat.task_backends[alias]
    except Exception as exc:  # the framework's InvalidTaskBackend(Error), whichever its name
        raise CommandError(f"TASKS has no backend {alias!r}: {exc}") from None
    if not isinstance(backend, JobqBackend):
        raise CommandError(
            f"TASKS[{alias!r}] is {type(backend).__module__}.{type(backend).__name__}, "
            f"not jobq.django.JobqBackend"
        )
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = settings.SETTINGS_MODULE
    project = os.path.abspath(sys.path[0] or os.getcwd())  # manage.py's folder
    env["PYTHONPATH"] = os.pathsep.join(p for p in (project, env.get("PYTHONPATH", "")) if p)
    argv = [sys.executable, "-m", "jobq", subcommand]
    config = backend.options.get("config")
    if config is not None:
        argv += ["--config", str(config)]
    if backend.options.get("database") is not None:
        env["JOBQ_DATABASE"] = str(backend.options["database"])
    return argv + list(rest), env
