"""The first handler module of a Django project's jobq workers: ``handlers =
["jobq.django.worker", "shop.tasks", ...]`` in jobq.toml.

Imported once in the fork server's template (and in a worker started by exec), it calls
``django.setup()`` with ``$DJANGO_SETTINGS_MODULE`` (``manage.py jobq run`` sets it), so the
task modules listed after it import as in the web process, and each forked worker starts set
up, in milliseconds. Django's database connections are closed here and again before every fork
of this process (``os.register_at_fork``): a connection must never be shared by two processes.
It defines no handler: the tasks' modules do (``jobq.django.task``).
"""

from __future__ import annotations

import os

import django
from django.apps import apps
from django.db import connections


def close_connections() -> None:
    """Close this thread's Django connections, except one inside a transaction (closing it
    would break the transaction; a fork in the middle of one is the caller's bug)."""
    for conn in connections.all(initialized_only=True):
        if not conn.in_atomic_block:
            conn.close()


if not apps.ready:
    if not os.environ.get("DJANGO_SETTINGS_MODULE"):
        raise RuntimeError(
            "jobq.django.worker: DJANGO_SETTINGS_MODULE is not set; run the supervisor "
            "with `python manage.py jobq run`, or set it in its environment"
        )
    django.setup()
close_connections()
os.register_at_fork(before=close_connections)
