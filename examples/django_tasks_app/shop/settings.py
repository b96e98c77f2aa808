"""Settings of the Django Tasks example: one app (orders), SQLite, tasks run by jobq.

Django's database is jobq's (the ``database`` of jobq.toml, or ``$JOBQ_DATABASE``), so
``confirm_order.enqueue(...)`` in a view writes the job in the view's own transaction.
``JOBQ_DJANGO_DB`` moves it (the tests do).
"""

import os
from pathlib import Path

from jobq import load_config as load_jobq_config

BASE_DIR = Path(__file__).resolve().parent.parent
JOBQ_CONFIG = BASE_DIR / "jobq.toml"
DATABASE_FILE = Path(os.environ.get("JOBQ_DJANGO_DB") or load_jobq_config(JOBQ_CONFIG).database)
DATABASE_FILE.parent.mkdir(parents=True, exist_ok=True)
SECRET_KEY = "example-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
try:
    import django.tasks  # noqa: F401  Django 6 has the tasks framework built in

    TASKS_APP = []
except ImportError:
    TASKS_APP = ["django_tasks"]  # Django 5.2: the django-tasks backport
INSTALLED_APPS = ["django.contrib.contenttypes", *TASKS_APP, "jobq.django", "orders"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "shop.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(DATABASE_FILE),
        # Take SQLite's write lock at BEGIN, as jobq does (see docs/django.md).
        "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": 5},
    }
}
TASKS = {
    "default": {
        "BACKEND": "jobq.django.JobqBackend",
        "OPTIONS": {"config": str(JOBQ_CONFIG)},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
