"""The Django Tasks API, from Django itself (``django.tasks``, Django 6+) when it has it, else
from the ``django-tasks`` backport (Django 5.2, the same API under ``django_tasks``).

Every other module of ``jobq.django`` imports these names from here, so which of the two is in
use is decided in one place.
"""

from __future__ import annotations

import importlib
from typing import Any


def _first(*names: str) -> Any:
    """The first of the modules ``names`` that imports (ImportError naming the extra if none)."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(
        "jobq.django needs Django 6's django.tasks or the django-tasks backport: "
        "pip install 'jobq[django]'"
    )


_ROOT = _first("django.tasks", "django_tasks").__name__
tasks = importlib.import_module(_ROOT)
base = importlib.import_module(f"{_ROOT}.base")
backends_base = importlib.import_module(f"{_ROOT}.backends.base")
exceptions = importlib.import_module(f"{_ROOT}.exceptions")
signals = importlib.import_module(f"{_ROOT}.signals")
utils = importlib.import_module(f"{_ROOT}.utils")

BaseTaskBackend = backends_base.BaseTaskBackend
Task = base.Task
TaskContext = base.TaskContext
TaskError = base.TaskError
TaskResult = base.TaskResult
TaskResultStatus = base.TaskResultStatus
DEFAULT_TASK_QUEUE_NAME = base.DEFAULT_TASK_QUEUE_NAME
DEFAULT_TASK_PRIORITY = base.DEFAULT_TASK_PRIORITY
TASK_MIN_PRIORITY = base.TASK_MIN_PRIORITY
TASK_MAX_PRIORITY = base.TASK_MAX_PRIORITY
task_backends = tasks.task_backends
task_enqueued = signals.task_enqueued
task_started = signals.task_started
task_finished = signals.task_finished
normalize_json = utils.normalize_json
# Django 6 names them InvalidTask / InvalidTaskBackend; the backport adds an "Error" suffix.
InvalidTask = getattr(exceptions, "InvalidTask", None) or exceptions.InvalidTaskError
TaskResultDoesNotExist = exceptions.TaskResultDoesNotExist


def load_checks() -> None:
    """Register the framework's check of every task backend (``backend.check()``), also when
    the backport's app is not in ``INSTALLED_APPS``. Registering twice is harmless."""
    try:
        importlib.import_module(f"{_ROOT}.checks")
    except ImportError:
        pass
