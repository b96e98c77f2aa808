"""The default test run's progress (tests/progress.py): a line per test file as it ends, with
its counts, in one process and in pytest-xdist's two, instead of a dot per test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


def run_pytest(folder: Path, *args: str) -> str:
    (folder / "conftest.py").write_text('pytest_plugins = ["tests.progress"]\n')
    (folder / "test_one.py").write_text(
        "def test_a():\n    pass\n\ndef test_b():\n    assert False\n"
    )
    (folder / "test_two.py").write_text(
        "import pytest\n\n@pytest.mark.skip(reason='x')\n"
        "def test_c():\n    pass\n\ndef test_d():\n    pass\n"
    )
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stdout + r.stderr  # test_b fails
    return r.stdout


@pytest.mark.parametrize("args", [(), ("-n", "2")], ids=["one process", "xdist"])
def test_a_line_per_file_with_its_counts_and_no_dots(tmp_path, args):
    out = run_pytest(tmp_path, *args)
    lines = [ln for ln in out.splitlines() if re.match(r"\[\s*\d+%\] test_", ln)]
    assert sorted(re.sub(r" in [\d.]+ s .*", "", ln.split("] ", 1)[1]) for ln in lines) == [
        "test_one.py: 1 failed, 1 passed",
        "test_two.py: 1 skipped, 1 passed",
    ], out
    assert lines[-1].startswith("[100%]"), out
    assert not re.search(r"^\.+", out, re.M), out  # no dots for passed tests
    assert "FAILED test_one.py::test_b" in out  # the summary is pytest's own


def test_verbose_keeps_pytests_own_lines(tmp_path):
    out = run_pytest(tmp_path, "-v")
    assert "test_one.py::test_a PASSED" in out and not re.search(r"\[\s*\d+%\] test_one.py:", out)
