"""What ``manage.py check`` says about a jobq task backend (``JobqBackend.check``).

jobq.E001  the jobq config cannot be read, or the ``using`` alias is not a Django database
jobq.E002  ``jobq.django`` is not in INSTALLED_APPS: a thread's first enqueue inside a
           transaction would open its queue there, and wait for its own transaction's lock
jobq.W001  the ``using`` database is not jobq's: jobs are written when the transaction commits
jobq.E003  a name of ``QUEUES`` that jobq cannot name a queue with (each name is a jobq queue)
jobq.W003  the config's ``handlers`` do not start with jobq.django.worker: workers cannot set
           Django up before importing the task modules
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.conf import settings
from django.core import checks

from shared.settings.config import ConfigError
from shared.model.queuenames import queue_name_error


def backend_messages(backend: Any) -> list[checks.CheckMessage]:
    where = f"TASKS[{backend.alias!r}]"
    if backend.using not in settings.DATABASES:
        return [
            checks.Error(
                f"{where}: OPTIONS 'using' = {backend.using!r} is not a database in DATABASES",
                id="jobq.E001",
            )
        ]
    try:
        config = backend.config
        same = backend.in_transaction_writes()
    except (ConfigError, ValueError) as exc:
        return [
            checks.Error(
                f"{where}: the jobq config cannot be read: {exc}",
                id="jobq.E001",
                hint="set OPTIONS 'config' to your jobq.toml, or 'database'",
            )
        ]
    return [
        *_transaction_messages(backend, where, same),
        *_queue_messages(backend, where),
        *_handler_messages(config, where),
    ]


def _transaction_messages(backend: Any, where: str, same: bool) -> list[checks.CheckMessage]:
    """jobq.E002 and jobq.W001: how enqueues meet the caller's transaction (``same``: the
    ``using`` database is jobq's)."""
    from .backend import location

    out: list[checks.CheckMessage] = []
    if same and not apps.is_installed("jobq.django"):
        out.append(
            checks.Error(
                f"{where}: 'jobq.django' is not in INSTALLED_APPS",
                id="jobq.E002",
                hint="add it: it opens each thread's queue before its first transaction",
            )
        )
    if not same:
        out.append(
            checks.Warning(
                f"{where}: Django database {backend.using!r} is not the jobq database ({location(backend)}): "
                "tasks are enqueued when the transaction commits, not inside it",
                hint="point DATABASES and jobq's database at the same file or PostgreSQL database",
                id="jobq.W001",
            )
        )
    return out


def _queue_messages(backend: Any, where: str) -> list[checks.CheckMessage]:
    """jobq.E003 for each name of ``QUEUES`` that is not a valid jobq queue name."""
    out: list[checks.CheckMessage] = []
    for name in sorted(backend.queues, key=repr):
        why = queue_name_error(name)
        if why is not None:
            out.append(
                checks.Error(
                    f"{where}: QUEUES: {why}",
                    id="jobq.E003",
                    hint="each name of QUEUES is a jobq queue (docs/queues.md)",
                )
            )
    return out


def _handler_messages(config: Any, where: str) -> list[checks.CheckMessage]:
    """jobq.W003 if the config's handlers do not start with jobq.django.worker."""
    from .backend import WORKER_MODULE

    out: list[checks.CheckMessage] = []
    if config.handlers and config.handlers[0] != WORKER_MODULE:
        out.append(
            checks.Warning(
                f"{where}: jobq's handlers {list(config.handlers)} do not start with {WORKER_MODULE!r}: "
                "its workers would import the task modules before Django is set up",
                hint=f'handlers = ["{WORKER_MODULE}", "<your app>.tasks"] in {config.path or "jobq.toml"}',
                id="jobq.W003",
            )
        )
    return out
