"""The layering, checked (issue 13): ``supervisor`` and ``worker`` import ``shared`` and never each
other; only the engine factory (``shared/engines/__init__.py``) imports an engine package; no
module outside the SQLite engine imports ``sqlite3`` or names a PRAGMA; no module outside the
engines reaches a store's connection (an attribute ``.conn``) or runs SQL on one (a call of
``.execute``, ``.executemany`` or ``.executescript``): every read goes through the contract.

An AST walk over the source (every ``import`` statement, also inside functions, relative ones
resolved), so a lazy import inside a function counts too. Tests may use ``sqlite3`` directly to
inspect a database; the rules are for the runtime packages.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
PACKAGES = ("supervisor", "worker", "shared")
FACTORY = "shared.engines"
ENGINES = "shared.engines."  # shared.engines.<engine>[.<module>]


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the runtime packages under ``root``."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def imports(name: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported module) of every import in a module, relative imports made absolute;
    ``from a import b`` yields ``a.b`` too (b may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


SQL_CALLS = {"execute", "executemany", "executescript"}


def sql_uses(path: Path) -> list[tuple[int, str]]:
    """(line, what) of every ``x.conn`` attribute and every ``x.execute(...)``-like call."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "conn":
            out.append((node.lineno, "reads a store's connection (.conn)"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            out.append((node.lineno, f"runs SQL (.{node.func.attr})"))
    return out


def engine_of(module: str, engines: set[str]) -> str | None:
    """'shared.engines.sqlite' for any module inside that engine package; None outside every
    engine (``shared.engines.open_store`` is the factory's function, not an engine)."""
    if not module.startswith(ENGINES):
        return None
    first = module[len(ENGINES):].split(".")[0]
    return ENGINES + first if first in engines else None


def violations(root: Path) -> list[str]:
    """One message per (file, line, rule) broken."""
    out: dict[tuple[str, int, str], str] = {}
    engines = {p.parent.name for p in (root / "shared" / "engines").glob("*/__init__.py")}
    for name, path in modules(root).items():
        where = f"{path.relative_to(root)}"
        top, mine = name.split(".")[0], engine_of(name, engines)
        for line, target in imports(name, path):
            other = target.split(".")[0]
            if {top, other} == {"supervisor", "worker"}:
                out.setdefault((where, line, "cross"), f"{where}:{line}: {top} imports {target} "
                               f"({top} and {other} never import each other)")
            eng = engine_of(target, engines)
            if eng is not None and name != FACTORY and eng != mine:
                out.setdefault((where, line, "engine"), f"{where}:{line}: imports {target}: only the "
                               f"engine factory ({FACTORY}) imports an engine")
            if other == "sqlite3" and mine != ENGINES + "sqlite":
                out.setdefault((where, line, "sqlite3"), f"{where}:{line}: imports sqlite3 outside the SQLite engine")
        if mine is None and name != FACTORY:
            for line, what in sql_uses(path):
                out.setdefault((where, line, "sql"), f"{where}:{line}: {what} outside the engines: "
                               f"add a method to the store contract (shared.contract)")
        if mine is None:
            for no, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if "PRAGMA" in text.upper():
                    out.setdefault((where, no, "pragma"), f"{where}:{no}: names a PRAGMA outside the SQLite engine")
    return list(out.values())


def test_the_runtime_packages_keep_their_layers():
    assert violations(REPO) == []


def jobq_violations(root: Path) -> list[str]:
    """Where the user-facing ``jobq`` package sits (issue 22): it imports ``shared`` and
    ``worker`` (never an engine), ``supervisor`` only lazily in ``jobq/__main__.py`` (the
    command); no runtime package imports ``jobq`` (a worker serves tasks without it)."""
    out: dict[tuple[str, int], str] = {}
    for path in sorted((root / "jobq").rglob("*.py")):
        where = str(path.relative_to(root))
        name = "jobq" if path.name == "__init__.py" else f"jobq.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"), where)
        top_level = {n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
        for line, target in imports(name, path):
            if target.startswith(ENGINES):
                out.setdefault((where, line), f"{where}:{line}: imports {target}: only the engine factory "
                               f"imports an engine")
            elif target.split(".")[0] == "supervisor" and (path.name != "__main__.py" or line in top_level):
                out.setdefault((where, line), f"{where}:{line}: imports {target}: jobq imports supervisor "
                               f"only lazily, in jobq/__main__.py")
    for name, path in modules(root).items():
        for line, target in imports(name, path):
            if target.split(".")[0] == "jobq":
                where = str(path.relative_to(root))
                out.setdefault((where, line), f"{where}:{line}: imports {target}: the runtime packages "
                               f"never import jobq")
    return list(out.values())


def empty_packages(root: Path, names: tuple[str, ...]) -> None:
    """A tree of empty packages under ``root``, for the checks' own tests."""
    for pkg in names:
        (root / pkg).mkdir()
        (root / pkg / "__init__.py").write_text("")


def test_jobq_imports_shared_and_worker_and_supervisor_only_for_its_command():
    assert (REPO / "jobq" / "__init__.py").exists()
    assert jobq_violations(REPO) == []


@pytest.mark.parametrize("path, text, named", [
    ("jobq/x.py", "from supervisor.cli import main\n", "only lazily"),
    ("jobq/__main__.py", "from supervisor.cli import main\n", "only lazily"),
    ("jobq/x.py", "def f():\n    import supervisor\n", "only lazily"),
    ("jobq/x.py", "from shared.engines.sqlite import store\n", "only the engine factory"),
    ("shared/x.py", "def f():\n    import jobq\n", "never import jobq"),
    ("worker/x.py", "from jobq import task\n", "never import jobq"),
])
def test_the_jobq_check_finds_each_kind_of_breach(tmp_path, path, text, named):
    empty_packages(tmp_path, (*PACKAGES, "jobq"))
    (tmp_path / "jobq/__init__.py").write_text("from shared.api import JobQueue\nfrom worker import handler\n")
    (tmp_path / "jobq/__main__.py").write_text("def main():\n    from supervisor.cli import main\n")
    assert jobq_violations(tmp_path) == []  # the allowed shapes pass
    (tmp_path / path).write_text(text)
    found = jobq_violations(tmp_path)
    assert len(found) == 1 and named in found[0] and path in found[0], found


def test_the_engines_and_the_factory_are_where_the_rules_expect_them():
    found = modules(REPO)
    assert FACTORY in found and ENGINES + "sqlite" in found
    assert any(t.startswith(ENGINES + "sqlite") for _, t in imports(FACTORY, found[FACTORY]))


@pytest.mark.parametrize("path, text, named", [
    ("supervisor/x.py", "from worker.loop import Worker\n", "never import each other"),
    ("worker/x.py", "def f():\n    import supervisor.arbiter\n", "never import each other"),
    ("supervisor/x.py", "from shared.engines.sqlite import SqliteStore\n", "only the engine factory"),
    ("shared/x.py", "from .engines.sqlite.store import SqliteStore\n", "only the engine factory"),
    ("shared/engines/other/x.py", "from ..sqlite import wakeup\n", "only the engine factory"),
    ("worker/x.py", "import sqlite3\n", "sqlite3 outside the SQLite engine"),
    ("shared/x.py", "from sqlite3 import Connection\n", "sqlite3 outside the SQLite engine"),
    ("supervisor/x.py", "SQL = 'PRAGMA wal_checkpoint(TRUNCATE)'\n", "names a PRAGMA"),
    ("shared/x.py", "def f(store):\n    return store.conn.execute('SELECT 1')\n", "outside the engines"),
    ("supervisor/x.py", "def f(store):\n    c = store.conn\n", "reads a store's connection"),
    ("supervisor/x.py", "def f(c):\n    c.executemany('DELETE FROM jobs', [])\n", "runs SQL (.executemany)"),
])
def test_the_check_finds_each_kind_of_breach(tmp_path, path, text, named):
    empty_packages(tmp_path, PACKAGES)
    for sub in ("shared/engines", "shared/engines/sqlite", "shared/engines/other"):
        (tmp_path / sub).mkdir(exist_ok=True)
        (tmp_path / sub / "__init__.py").write_text("")
    (tmp_path / "shared/engines/__init__.py").write_text("from .sqlite import store\n")
    (tmp_path / "shared/engines/sqlite/store.py").write_text("import sqlite3\nfrom . import lead\n"
                                                             "X = 'PRAGMA busy_timeout = 0'\n")
    assert violations(tmp_path) == []  # the allowed shapes pass
    (tmp_path / path).write_text(text)
    found = violations(tmp_path)
    assert len(found) == 1 and named in found[0] and path in found[0], found
