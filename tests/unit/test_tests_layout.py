"""The tests' own layout: every test module lives in a folder that says what it tests,
and every behaviour suite runs on each engine (``pytestmark = pytest.mark.engines``, see
tests/conftest.py); a test of one engine only there says why (``engine_only(..., reason=...)``,
checked when the tests are collected)."""
from __future__ import annotations

import ast
from pathlib import Path

TESTS = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists()) / "tests"
FOLDERS = ("unit", "engines", "behaviour", "process", "proofs")


def on_each_engine(path: Path) -> bool:
    """Does the module run its tests per engine: ``pytestmark = pytest.mark.engines`` (the
    ``database`` fixture), or the ``engine`` fixture (tests/engines/__init__.py's engines)?"""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            if "mark.engines" in ast.unparse(node.value):
                return True
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(a.arg == "engine" for a in n.args.args)
               for n in ast.walk(tree))


def test_every_behaviour_suite_runs_on_each_engine():
    suites = sorted((TESTS / "behaviour").glob("test_*.py"))
    assert len(suites) >= 10
    assert [p.name for p in suites if not on_each_engine(p)] == []


def test_test_modules_live_in_the_folders_by_what_they_test():
    """New test files may land at the top of tests/ from branches of their time: this names them."""
    stray = [str(p.relative_to(TESTS)) for p in TESTS.rglob("test_*.py")
             if p.relative_to(TESTS).parts[0] not in FOLDERS]
    assert stray == [], f"move these into one of {FOLDERS} (docs/internals.md, Tests)"
