"""psycopg's version is told to it by the PostgreSQL engine (``shared.engines.postgres
.driverversion``) before its import, from the dist-info folder beside it: the engine's modules
(what a supervisor preloads before forking its template) import psycopg without
``importlib.metadata``, and psycopg still says the version its distribution has."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.proc import env

pytest.importorskip("psycopg")

PRELOAD = """
import json, sys
from shared.engines import preload, target
preload(target("postgresql://127.0.0.1/x"))  # imports, never connects
import psycopg
print(json.dumps({
    "metadata": "importlib.metadata" in sys.modules,
    "version": psycopg.__version__,
    "binary": getattr(sys.modules.get("psycopg_binary"), "__version__", None),
}))
"""


def _run(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code], env=env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.splitlines()[-1])


def test_the_engine_imports_psycopg_without_importlib_metadata_and_its_true_version():
    from importlib import metadata

    seen = _run(PRELOAD)
    assert seen["metadata"] is False
    assert seen["version"] == metadata.version("psycopg")
    if seen["binary"] is not None:
        assert seen["binary"] == metadata.version("psycopg-binary")


def test_psycopg_imported_first_keeps_its_own_version_module():
    seen = _run(
        "import json, sys, psycopg\n"
        "from shared.engines.postgres import driverversion\n"
        "print(json.dumps({'installed': driverversion.install(),"
        " 'file': sys.modules['psycopg.version'].__file__}))"
    )
    assert seen["installed"] == [] and seen["file"].endswith("version.py")
