"""The ``jobq.django`` app (``INSTALLED_APPS``): the backends' checks, the ``jobq`` management
command, and the opening of each thread's queue when it connects to the jobq database."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.db.backends.signals import connection_created


class JobqConfig(AppConfig):
    name = "jobq.django"
    label = "jobq"
    verbose_name = "jobq"

    def ready(self) -> None:
        from . import compat

        compat.load_checks()
        connection_created.connect(prepare_backends, dispatch_uid="jobq.django.prepare_backends")


def prepare_backends(sender: Any, connection: Any, **kwargs: Any) -> None:
    """A Django connection was just opened, outside any transaction: each jobq backend that
    writes through it opens this thread's queue now (:meth:`JobqBackend.prepare`)."""
    from django.conf import settings

    from shared.settings.config import ConfigError
    from shared.model.errors import StoreError

    from . import compat
    from .backend import JobqBackend

    for name, params in getattr(settings, "TASKS", {}).items():
        if str(params.get("BACKEND", "")) != "jobq.django.JobqBackend":
            continue
        backend = compat.task_backends[name]
        if isinstance(backend, JobqBackend) and backend.using == connection.alias:
            try:
                backend.prepare()
            except (ConfigError, StoreError):
                pass  # not this connection's failure: the first enqueue raises it
