"""The request side's JobQueue: one per thread (a JobQueue holds one sqlite3 connection, which
belongs to the thread that opened it), on Django's own database file."""

import threading

from django.conf import settings

from jobq import JobQueue

_local = threading.local()


def get_queue() -> JobQueue:
    queue = getattr(_local, "queue", None)
    if queue is None:
        queue = _local.queue = JobQueue(str(settings.DATABASES["default"]["NAME"]))
    return queue
