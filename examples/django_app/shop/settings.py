"""Settings of the recipe's tiny Django site: one app (orders), SQLite, no admin or templates.

The database is the file jobq uses too (``examples/django_app/jobq.toml``), so a view can write
its rows and enqueue a job in one transaction. ``JOBQ_DJANGO_DB`` moves it (the tests do).
"""
import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = "recipe-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
INSTALLED_APPS = ["django.contrib.contenttypes", "orders"]
MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "shop.urls"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("JOBQ_DJANGO_DB", str(BASE_DIR / "db.sqlite3")),
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
