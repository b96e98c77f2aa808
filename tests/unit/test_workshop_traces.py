"""No traces of the workshop in what ships: no reference to an issue tracker's numbers (the tracker
is not in the repository) in code, comments, tests or docs, and every dotted module name that a
docstring, a comment or a docs page gives (``shared.…``, ``supervisor.…``, ``worker.…``,
``jobq.…``) names a module or attribute that exists."""

from __future__ import annotations

import ast
import importlib
import io
import re
import subprocess
import tokenize
import tomllib
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
RUNTIME = ("shared", "supervisor", "worker", "jobq")
KINDS = (".py", ".md", ".toml", ".html", ".cfg", ".yml", ".yaml", ".js", ".css", ".txt")
ISSUE_NUMBER = re.compile(r"(?<![a-z])issues?[\s_#-]*#?\d", re.IGNORECASE)
DOTTED = re.compile(r"(?<![\w./-])(?:shared|supervisor|worker|jobq)(?:\.[A-Za-z_]\w*)+")
FILE_SUFFIXES = {
    "py",
    "toml",
    "db",
    "sqlite",
    "sqlite3",
    "log",
    "json",
    "md",
    "pid",
    "sock",
    "lock",
    "txt",
    "html",
    "css",
    "js",
    "yml",
    "yaml",
    "cfg",
    "ini",
    "service",
}


def shipped_files(root: Path = REPO) -> list[Path]:
    """The tracked text files of the kinds above (``git ls-files``; every file under ``root``
    outside hidden folders, ``site`` and ``build`` when there is no git checkout)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True, timeout=60
        ).stdout.decode()
        paths = [root / p for p in out.split("\0") if p]
    except (OSError, subprocess.SubprocessError):
        paths = [
            p
            for p in root.rglob("*")
            if not any(
                part.startswith(".") or part in ("site", "build")
                for part in p.relative_to(root).parts
            )
        ]
    return [p for p in paths if p.suffix in KINDS and p.is_file()]


def issue_numbers(text: str) -> list[tuple[int, str]]:
    """``(line, match)`` for each issue-number reference in ``text``, across line breaks too."""
    return [
        (text.count("\n", 0, m.start()) + 1, " ".join(m.group().split()))
        for m in ISSUE_NUMBER.finditer(text)
    ]


def test_no_issue_numbers_in_shipped_files():
    found = [
        f"{p.relative_to(REPO)}:{line}: {what}"
        for p in shipped_files()
        for line, what in issue_numbers(p.read_text(encoding="utf-8"))
    ]
    assert found == [], (
        "references to an issue tracker that is not in the repository; say "
        "what is meant instead:\n" + "\n".join(found)
    )


def prose(path: Path, text: str) -> list[tuple[int, str]]:
    """``(first line, text)`` of the prose in a file: a Python file's docstrings and comments, a
    page's (or a config file's) whole text."""
    if path.suffix != ".py":
        return [(1, text)]
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    parts = [(tok.start[0], tok.string) for tok in tokens if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                parts.append((first.lineno, first.value.value))
    return sorted(parts)


def has_attribute(owner: object, name: str) -> bool:
    """``name`` on ``owner``, counting the fields a class declares but sets per instance."""
    if hasattr(owner, name):
        return True
    if isinstance(owner, type):
        return any(
            name in getattr(k, "__annotations__", {}) or name in getattr(k, "__slots__", ())
            for k in owner.__mro__
        )
    return False


def resolves(dotted: str) -> bool:
    """Does ``dotted`` name a module, or an attribute (chain) of one? A module that exists but
    will not import here (``jobq.django.worker`` wants Django's settings) counts as found."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            owner: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        except Exception:  # it exists; what it needs at import is not here
            return True
        for name in parts[i:]:
            if not has_attribute(owner, name):
                return False
            owner = getattr(owner, name, None)
        return True
    return False


def program_names(root: Path = REPO) -> set[str]:
    """Dotted names the program itself uses that are not modules: the config's keys (the shipped
    jobq.toml's, ``supervisor.workers``), the event, metric, span attribute and check names
    written as string literals in the runtime packages (``worker.fenced``, ``jobq.job.type``),
    and the loggers (``get_logger("worker")`` is ``jobq.worker``)."""

    def keys(table: dict, prefix: str) -> set[str]:
        out = set()
        for k, v in table.items():
            out |= {f"{prefix}{k}"} | (keys(v, f"{prefix}{k}.") if isinstance(v, dict) else set())
        return out

    with open(root / "jobq.toml", "rb") as f:
        names = keys(tomllib.load(f), "")
    for pkg in RUNTIME:
        for path in (root / pkg).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    names |= {node.value} if DOTTED.fullmatch(node.value) else set()
                elif (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) == "get_logger"
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                ):
                    names.add(f"jobq.{node.args[0].value}")
    return names


def dotted_names(path: Path, text: str) -> list[tuple[int, str]]:
    """``(line, name)`` for each dotted ``shared.``/``supervisor.``/``worker.``/``jobq.`` name in
    the prose of a file, file names (``jobq.toml``) left out."""
    return [
        (first + chunk.count("\n", 0, m.start()), m.group())
        for first, chunk in prose(path, text)
        for m in DOTTED.finditer(chunk)
        if m.group().rsplit(".", 1)[1] not in FILE_SUFFIXES
    ]


def test_docstrings_comments_and_docs_name_modules_that_exist():
    used = program_names()
    missing = [
        f"{p.relative_to(REPO)}:{line}: {name}"
        for p in shipped_files()
        for line, name in dotted_names(p, p.read_text(encoding="utf-8"))
        if name not in used and not resolves(name)
    ]
    assert missing == [], "names of modules or attributes that do not exist:\n" + "\n".join(missing)


ISSUE = "iss" + "ue"  # spelt apart, so that this file passes its own check


@pytest.mark.parametrize(
    "text, found",
    [
        (f"see {ISSUE} 30's table", [(1, f"{ISSUE} 3")]),
        (f"({ISSUE.title()} #14)\nand then", [(1, f"{ISSUE.title()} #1")]),
        (f"as the {ISSUE}\n\n7 asks", [(1, f"{ISSUE} 7")]),
        (f"x = 1\ntargets_{ISSUE}30 = 1", [(2, f"{ISSUE}3")]),
        ("the issue's target; tissues; issue tracker", []),
    ],
)
def test_the_issue_check_finds_each_form(text, found):
    assert issue_numbers(text) == found


def test_the_name_check_finds_dead_names_and_leaves_files_alone(tmp_path):
    page = tmp_path / "page.md"
    text = (
        "`shared.nosuchmodule` and `supervisor.gendocs.nosuch`; `worker.__main__`, "
        "`shared.settings.config`, jobq.toml, docs/jobq.md, self.worker.pid\n"
    )
    names = [name for _, name in dotted_names(page, text)]
    assert names == [
        "shared.nosuchmodule",
        "supervisor.gendocs.nosuch",
        "worker.__main__",
        "shared.settings.config",
    ]
    assert [resolves(n) for n in names] == [False, False, True, True]
    code = tmp_path / "m.py"
    source = '"""Uses shared.gone."""\nx = "shared.ignored"  # and worker.gone\n'
    assert dotted_names(code, source) == [(1, "shared.gone"), (2, "worker.gone")]
