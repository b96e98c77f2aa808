"""ruff, as pyproject.toml configures it, finds nothing in the tree: no syntax error, no
undefined or misused name (the errors a merge of two branches most often leaves behind)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_nothing():
    run = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_ruff_is_configured_at_width_100_and_would_catch_an_undefined_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    return undefined_name\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--no-cache",
            "--config",
            str(ROOT / "pyproject.toml"),
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1 and "F821" in run.stdout, run.stdout + run.stderr
    width = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--show-settings", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "line_length = 100" in width.stdout, width.stdout[-2000:]


def test_the_tree_is_formatted_by_ruff_at_width_100():
    """One formatter for everyone: a file ``ruff format`` would change fails here, so a merge or
    an editor's own style cannot drift the tree (run ``ruff format .`` to fix)."""
    run = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
