"""The old module paths of ``shared`` (before its rooms) still import: each old dotted name is
the very module it moved to (shared/_moved.py), so a monkeypatch through either name patches one
module; ``from shared import ...`` gives what it always gave."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import shared
from shared._moved import MOVED

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


@pytest.mark.parametrize("old", sorted(MOVED))
def test_each_old_name_is_the_new_module_itself(old):
    new = importlib.import_module(MOVED[old])
    assert new.__name__ == MOVED[old]
    assert importlib.import_module(old) is new
    assert sys.modules[old] is new
    assert not (REPO / (old.replace(".", "/") + ".py")).exists()  # an alias, no shim file


def test_the_old_forms_of_import_work_and_patch_one_module(monkeypatch):
    import shared.api
    import shared.producer.api
    import shared.settings.config
    from shared.config import load
    from shared.tasks import task
    from shared import config as old_config

    assert shared.api is shared.producer.api and old_config is shared.settings.config
    assert load is shared.settings.config.load and task.__module__ == "shared.producer.tasks"
    monkeypatch.setattr("shared.config._SECONDS", "(patched)")
    assert shared.settings.config._SECONDS == "(patched)"


def test_the_package_exports_are_unchanged():
    for name in shared.__all__:
        assert getattr(shared, name) is not None, name
    assert shared.JobQueue.__module__ == "shared.producer.api"


def test_an_old_name_imports_first_in_a_fresh_interpreter():
    """Importing an old name before anything else of shared (the alias is installed by the
    package itself, which every import of a module of shared runs first)."""
    code = (
        "import shared.handlers as old, shared.execution.handlers as new, sys\n"
        "assert old is new and sys.modules['shared.handlers'] is new\n"
        "from shared.procs import owner_token\n"
        "from shared.runtime.processes import owner_token as t\n"
        "assert owner_token is t\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, timeout=120)


def test_jobq_s_own_errors_keep_the_name_their_error_text_shows():
    """A failed job's error text names ``shared.handlers.PermanentError`` as it always has; the
    name still resolves (to the moved module), so such an error pickles and comes back."""
    from shared.execution.handlers import PermanentError, RetryAfter

    name = f"{PermanentError.__module__}.{PermanentError.__qualname__}"
    assert name == "shared.handlers.PermanentError"
    assert RetryAfter.__module__ == "shared.handlers"
    back = pickle.loads(pickle.dumps(PermanentError("bad input")))
    assert type(back) is PermanentError and str(back) == "bad input"
