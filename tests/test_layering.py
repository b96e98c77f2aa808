"""The layering, checked (issue 13): ``supervisor`` and ``worker`` import ``shared`` and never each
other; only the engine factory (``shared/engines/__init__.py``) imports an engine package; no
module outside the SQLite engine imports ``sqlite3`` or names a PRAGMA; no module outside the
engines reaches a store's connection (an attribute ``.conn``) or runs SQL on one (a call of
``.execute``, ``.executemany`` or ``.executescript``): every read goes through the contract.

The shared SQL layer (``shared/engines/sql``) is no engine: every engine builds on it. The read
layer (``shared/ops``) and what shows its figures (``status``, ``top``, the metrics, their
rendering, the dashboard and its templates) name no engine (issue 22): no "WAL", no
``wal_bytes``, no "sqlite" or "psycopg" in their code (comments and docstrings may explain);
an engine's own gauges reach them described by the engine (``OpsStore.gauges``).

An AST walk over the source (every ``import`` statement, also inside functions, relative ones
resolved), so a lazy import inside a function counts too. Tests may use ``sqlite3`` directly to
inspect a database; the rules are for the runtime packages.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("supervisor", "worker", "shared")
FACTORY = "shared.engines"
ENGINES = "shared.engines."  # shared.engines.<engine>[.<module>]
SHARED_SQL = "sql"  # shared.engines.sql: the SQL written once that engines build on, not an engine
# Modules that show the read layer's figures and name no engine: the read layer, the dashboard,
# and (wherever the CLI's modules live under supervisor/) these screens and their rendering.
NEUTRAL_PREFIXES = ("shared.ops", "supervisor.web")
NEUTRAL_SCREENS = {"status", "top", "metrics", "render", "stats"}
ENGINE_WORDS = re.compile(r"\bWAL\b|wal_bytes|(?i:sqlite|psycopg)")


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
    engines = {p.parent.name for p in (root / "shared" / "engines").glob("*/__init__.py")} - {SHARED_SQL}
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
        if not name.startswith(ENGINES) and name != FACTORY:  # the engines and their shared SQL run SQL
            for line, what in sql_uses(path):
                out.setdefault((where, line, "sql"), f"{where}:{line}: {what} outside the engines: "
                               f"add a method to the store contract (shared.contract)")
        if mine is None:
            for no, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if "PRAGMA" in text.upper():
                    out.setdefault((where, no, "pragma"), f"{where}:{no}: names a PRAGMA outside the SQLite engine")
        if neutral(name):
            for no, word in engine_words(path):
                out.setdefault((where, no, "word"), f"{where}:{no}: names an engine ({word!r}) where the "
                               f"engine's own gauges and spellings come from the engine")
    for path in sorted((root / "supervisor" / "web").rglob("*.html")):
        for no, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if m := ENGINE_WORDS.search(text):
                where = f"{path.relative_to(root)}"
                out.setdefault((where, no, "word"), f"{where}:{no}: names an engine ({m.group(0)!r})")
    return list(out.values())


def neutral(module: str) -> bool:
    """Whether ``module`` is one that names no engine (see the module's docstring)."""
    parts = module.split(".")
    return (any(module == p or module.startswith(p + ".") for p in NEUTRAL_PREFIXES)
            or (parts[0] == "supervisor" and parts[-1] in NEUTRAL_SCREENS))


def engine_words(path: Path) -> list[tuple[int, str]]:
    """(line, word) of every engine word in the code of ``path``: its strings (not docstrings)
    and names (identifiers, attributes, arguments)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    out = []
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            texts.append(node.value)
        elif isinstance(node, ast.Name):
            texts.append(node.id)
        elif isinstance(node, ast.Attribute):
            texts.append(node.attr)
        elif isinstance(node, ast.arg):
            texts.append(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.alias)):
            texts.append(node.name)
        out += [(node.lineno, m.group(0)) for t in texts if (m := ENGINE_WORDS.search(t))]
    return out


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
    ("shared/engines/other/x.py", "from ..sqlite import wakeup\n", "only the engine factory"),
    ("shared/ops/x.py", "LABEL = 'WAL'\n", "names an engine ('WAL')"),
    ("supervisor/status.py", "def f(store):\n    return store.wal_bytes()\n", "names an engine ('wal_bytes')"),
    ("supervisor/cli/top.py", "def f(snap):\n    return snap['wal_bytes']\n", "names an engine"),
    ("supervisor/web/x.py", "import psycopg\n", "names an engine ('psycopg')"),
    ("supervisor/web/templates/x.html", "<span>WAL</span>\n", "names an engine ('WAL')"),
])
def test_the_check_finds_each_kind_of_breach(tmp_path, path, text, named):
    empty_packages(tmp_path, PACKAGES)
    for sub in ("shared/engines", "shared/engines/sqlite", "shared/engines/other", "shared/engines/sql",
                "shared/ops", "supervisor/cli", "supervisor/web", "supervisor/web/templates"):
        (tmp_path / sub).mkdir(exist_ok=True)
        (tmp_path / sub / "__init__.py").write_text("")
    (tmp_path / "shared/engines/__init__.py").write_text("from .sqlite import store\n")
    (tmp_path / "shared/engines/sqlite/store.py").write_text("import sqlite3\nfrom . import lead\nfrom ..sql import base\n"
                                                             "X = 'PRAGMA busy_timeout = 0'\n")
    (tmp_path / "shared/engines/other/store.py").write_text("from ..sql import base\n")  # the shared SQL: no engine
    (tmp_path / "shared/ops/queue.py").write_text('"""Explains SQLite\'s WAL."""\n# and psycopg here\nX = 1\n')
    assert violations(tmp_path) == []  # the allowed shapes pass
    (tmp_path / path).write_text(text)
    found = violations(tmp_path)
    assert len(found) == 1 and named in found[0] and path in found[0], found
