"""jobq as Django's task backend: ``TASKS = {"default": {"BACKEND":
"jobq.django.JobqBackend", "OPTIONS": {"config": "jobq.toml"}}}`` and ``"jobq.django"`` in
``INSTALLED_APPS``. See docs/django.md.

``jobq.django.JobqBackend``  the backend (``jobq.django.backend``)
``jobq.django.worker``       the first module of the workers' ``handlers``: sets Django up
``manage.py jobq run|status|web``  the supervisor, status and dashboard with the project's settings
"""

from .backend import JobqBackend

__all__ = ["JobqBackend"]
