"""The manual (docs/, mkdocs.yml) builds with ``mkdocs build --strict``; the README is the short
front door with the two commands first and links that resolve."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
COMMANDS = (
    "pip install -e . && python -m supervisor --workers 8",
    'pip install -e ".[dev]" && pytest',
)


def test_manual_builds_strict(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        pytest.importorskip(
            module, reason=f"{module} is in the docs extra: pip install -e '.[docs]'"
        )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(REPO / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            "NO_MKDOCS_2_WARNING": "1",
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(REPO),
            "HOME": str(tmp_path),
        },
    )
    assert r.returncode == 0, r.stdout + r.stderr
    page = (tmp_path / "site" / "reference" / "index.html").read_text()
    assert "drain" in page and "enqueue_many" in page  # the API reference came from the docstrings
    assert (tmp_path / "site" / "configuration" / "index.html").exists()


def test_readme_is_the_front_door():
    text = (REPO / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"
    first_code = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert [ln.split("  ")[0].strip() for ln in first_code.splitlines()] == list(COMMANDS)
    assert text.index("```bash") < text.index("\n## ")  # before anything else
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (REPO / target).exists(), f"README links to missing {target}"


def test_ci_runs_the_readme_test_command_as_written():
    """CI runs the README's test command character for character, and the manual gives the same
    two commands: a new user's first ``pytest`` is what CI ran."""
    ci_lines = [ln.strip() for ln in (REPO / ".ci" / "run").read_text().splitlines()]
    assert COMMANDS[1] in ci_lines, ".ci/run does not run the README's test command as written"
    runs = [ln for ln in ci_lines if "pytest" in ln and not ln.startswith("#")]
    assert runs == [COMMANDS[1]], f"CI runs pytest some other way too: {runs}"
    for page in ("index.md", "getting-started.md"):
        text = (REPO / "docs" / page).read_text()
        block = text.split("```bash\n", 1)[1].split("```", 1)[0]
        assert [ln.split("  ")[0].strip() for ln in block.splitlines()] == list(COMMANDS), page


def test_every_manual_page_is_in_the_nav():
    nav = (REPO / "mkdocs.yml").read_text()
    for page in (REPO / "docs").glob("*.md"):
        assert f" {page.name}" in nav, f"docs/{page.name} is not in mkdocs.yml's nav"
