"""The developers' guide's size rules, measured: no runtime file over MAX_FILE_LINES lines and
no function (or method) over MAX_FUNCTION_LINES lines, ``def`` line to last line, docstring and
comments included, in the runtime packages (RUNTIME).
Every runtime package is held to them (the last offenders, the engines'
limited claims, were brought under the limits).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]  # the checkout (tests/unit/ is two below)
RUNTIME = ("shared", "supervisor", "worker", "jobq")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 40


def breaches(root: pathlib.Path, packages: tuple[str, ...] = RUNTIME) -> list[tuple[str, str]]:
    """``(path, what)`` for each file and function of ``packages`` under ``root`` over the
    limits, paths relative to ``root`` with forward slashes, longest first within each kind."""
    files, functions = [], []
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            text = path.read_text(encoding="utf-8")
            lines = len(text.splitlines())
            if lines > MAX_FILE_LINES:
                files.append((lines, rel, f"{rel}: {lines} lines (at most {MAX_FILE_LINES})"))
            for node in ast.walk(ast.parse(text, filename=rel)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    n = (node.end_lineno or node.lineno) - node.lineno + 1
                    if n > MAX_FUNCTION_LINES:
                        functions.append(
                            (
                                n,
                                rel,
                                f"{rel}:{node.lineno}: {node.name} is {n} lines "
                                f"(at most {MAX_FUNCTION_LINES})",
                            )
                        )
    return [
        (rel, what)
        for _, rel, what in sorted(files, reverse=True) + sorted(functions, reverse=True)
    ]


def test_no_runtime_file_or_function_over_the_limits():
    found = [what for _, what in breaches(ROOT)]
    assert found == [], "over the size limits:\n" + "\n".join(found)


def _long_function(name: str, lines: int) -> str:
    return f"def {name}():\n" + "    x = 1\n" * (lines - 1)


@pytest.mark.parametrize(
    "path, text, named",
    [
        ("worker/x.py", _long_function("f", MAX_FUNCTION_LINES + 1), "f is 41 lines"),
        (
            "supervisor/x.py",
            "class A:\n"
            + "".join(
                "    " + line + "\n"
                for line in _long_function("m", MAX_FUNCTION_LINES + 2).splitlines()
            ),
            "m is 42 lines",
        ),
        ("shared/x.py", "x = 1\n" * (MAX_FILE_LINES + 1), "401 lines"),
        ("jobq/x.py", "async " + _long_function("g", MAX_FUNCTION_LINES + 1), "g is 41 lines"),
    ],
)
def test_the_check_finds_each_kind_of_breach(tmp_path, path, text, named):
    for pkg in RUNTIME:
        (tmp_path / pkg).mkdir()
    (tmp_path / "worker" / "ok.py").write_text(
        _long_function("fine", MAX_FUNCTION_LINES)
        + "x = 1\n" * (MAX_FILE_LINES - MAX_FUNCTION_LINES)
    )
    assert breaches(tmp_path) == []  # exactly at the limits: fine
    (tmp_path / path).write_text(text)
    found = breaches(tmp_path)
    assert [rel for rel, _ in found] == [path] and named in found[0][1]
