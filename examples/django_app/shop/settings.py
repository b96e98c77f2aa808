"""Settings of the recipe's tiny Django site: one app (orders), SQLite, no admin or templates.

The database is the file jobq uses: the ``database`` of ``examples/django_app/jobq.toml`` (or
``$JOBQ_DATABASE``, as for jobq), read from there so the two never differ; a view writes its rows
and enqueues a job in one transaction. It lies outside the source tree, which running the
recipe leaves clean. ``JOBQ_DJANGO_DB`` moves it (the tests do).
"""

import os
from pathlib import Path

from jobq import load_config as load_jobq_config

BASE_DIR = Path(__file__).resolve().parent.parent
DATABASE_FILE = Path(
    os.environ.get("JOBQ_DJANGO_DB") or load_jobq_config(BASE_DIR / "jobq.toml").database
)
DATABASE_FILE.parent.mkdir(parents=True, exist_ok=True)
SECRET_KEY = "recipe-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
INSTALLED_APPS = ["django.contrib.contenttypes", "orders"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "shop.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(DATABASE_FILE),
        "OPTIONS": {
            # Take SQLite's write lock at BEGIN, as jobq does: a transaction that reads first and
            # writes later could otherwise fail with "database is locked" when a worker commits
            # in between, instead of waiting its turn.
            "transaction_mode": "IMMEDIATE",
            "timeout": 5,
        },
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
