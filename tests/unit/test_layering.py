"""The layering, checked: ``supervisor`` and ``worker`` import ``shared`` and never each
other; only the engine registry (``shared/engines/__init__.py``) imports an engine package (also
by name, for importlib) and chooses an engine (no ``engine == "sqlite"`` outside the engines); no
module outside the SQLite engine imports ``sqlite3`` or names a PRAGMA; no module outside the
engines reaches a store's connection (an attribute ``.conn``) or runs SQL on one (a call of
``.execute``, ``.executemany`` or ``.executescript``): every read goes through the contract.
The three programs in ``supervisor/`` stay apart: the CLI (``supervisor/cli``) and the
dashboard (``supervisor/web``) never import each other and share only ``shared`` (the ops layer,
``shared/ops``); the CLI loads the supervisor process only in ``run`` and the dashboard only in
``web``; ``shared`` imports neither ``supervisor`` nor ``worker``. Checked in the source and, for
``jobq status`` and the dashboard, in the modules a real process has loaded.
The shared SQL layer (``shared.engines.sql``) is no engine: the engines build on it (it runs
their SQL, so it may), it imports no engine and no driver, and only the engines and the ops
read layer (``shared.ops``) import it; so with the helper that runs the read layer's SQL
(``shared.engines.opsaccess``), which is no part of the store contract.

The shared SQL layer (``shared/engines/sql``) is no engine: every engine builds on it. The read
layer (``shared/ops``) and what shows its figures (``status``, ``top``, the metrics, their
rendering, the dashboard and its templates) name no engine: no "WAL", no
``wal_bytes``, no "sqlite" or "psycopg" in their code (comments and docstrings may explain);
an engine's own gauges reach them described by the engine (``OpsStore.gauges``).

Only ``shared.telemetry.tracing`` imports OpenTelemetry, and only inside its functions.

An AST walk over the source (every ``import`` statement, also inside functions, relative ones
resolved), so a lazy import inside a function counts too. Tests may use ``sqlite3`` directly to
inspect a database; the rules are for the runtime packages.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
PACKAGES = ("supervisor", "worker", "shared")
FACTORY = "shared.engines"
ENGINES = "shared.engines."  # shared.engines.<engine>[.<module>]
SHARED_SQL = "shared.engines.sql"  # SQL written once for every engine: not an engine
SQL_USERS = (ENGINES, "shared.ops")  # who may import it
OPS_ACCESS = "shared.engines.opsaccess"  # running the read layer's SQL: for the same two only
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
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
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
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in SQL_CALLS
        ):
            out.append((node.lineno, f"runs SQL (.{node.func.attr})"))
    return out


def engine_of(module: str, engines: set[str]) -> str | None:
    """'shared.engines.sqlite' for any module inside that engine package; None outside every
    engine (``shared.engines.open_store`` is the factory's function, not an engine)."""
    if not module.startswith(ENGINES):
        return None
    first = module[len(ENGINES) :].split(".")[0]
    return ENGINES + first if first in engines else None


def violations(root: Path) -> list[str]:
    """One message per (file, line, rule) broken."""
    out: dict[tuple[str, int, str], str] = {}
    engines = {p.parent.name for p in (root / "shared" / "engines").glob("*/__init__.py")} - {"sql"}
    for name, path in modules(root).items():
        where = f"{path.relative_to(root)}"
        top, mine = name.split(".")[0], engine_of(name, engines)
        for line, target in imports(name, path):
            other = target.split(".")[0]
            if {top, other} == {"supervisor", "worker"}:
                out.setdefault(
                    (where, line, "cross"),
                    f"{where}:{line}: {top} imports {target} "
                    f"({top} and {other} never import each other)",
                )
            eng = engine_of(target, engines)
            if eng is not None and name != FACTORY and eng != mine:
                out.setdefault(
                    (where, line, "engine"),
                    f"{where}:{line}: imports {target}: only the "
                    f"engine factory ({FACTORY}) imports an engine",
                )
            if other == "sqlite3" and mine != ENGINES + "sqlite":
                out.setdefault(
                    (where, line, "sqlite3"),
                    f"{where}:{line}: imports sqlite3 outside the SQLite engine",
                )
            if other == "psycopg" and _within(name, SHARED_SQL):
                out.setdefault(
                    (where, line, "psycopg"),
                    f"{where}:{line}: imports psycopg: the shared SQL layer names no driver",
                )
            if _within(target, OPS_ACCESS) and not _within(name, *SQL_USERS):
                out.setdefault(
                    (where, line, "ops access"),
                    f"{where}:{line}: imports {target}: "
                    f"only the engines and shared.ops run the read layer's SQL",
                )
            if _within(target, SHARED_SQL) and not _within(name, *SQL_USERS):
                out.setdefault(
                    (where, line, "shared sql"),
                    f"{where}:{line}: imports {target}: only the engines "
                    f"and shared.ops use the shared SQL layer",
                )
        if mine is None and name != FACTORY and not _within(name, SHARED_SQL):
            for line, what in sql_uses(path):
                out.setdefault(
                    (where, line, "sql"),
                    f"{where}:{line}: {what} outside the engines: "
                    f"add a method to the store contract (shared.engines.contract)",
                )
        if mine is None:
            for no, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if "PRAGMA" in text.upper():
                    out.setdefault(
                        (where, no, "pragma"),
                        f"{where}:{no}: names a PRAGMA outside the SQLite engine",
                    )
        if neutral(name):
            for no, word in engine_words(path):
                out.setdefault(
                    (where, no, "word"),
                    f"{where}:{no}: names an engine ({word!r}) where the "
                    f"engine's own gauges and spellings come from the engine",
                )
    for path in sorted((root / "supervisor" / "web").rglob("*.html")):
        for no, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if m := ENGINE_WORDS.search(text):
                where = f"{path.relative_to(root)}"
                out.setdefault(
                    (where, no, "word"), f"{where}:{no}: names an engine ({m.group(0)!r})"
                )
    return list(out.values())


def _within(module: str, *packages: str) -> bool:
    """Is ``module`` one of ``packages`` or inside one? (a prefix ending in "." means inside)"""
    return any(
        module == p or module.startswith(p if p.endswith(".") else p + ".") for p in packages
    )


def neutral(module: str) -> bool:
    """Whether ``module`` is one that names no engine (see the module's docstring)."""
    parts = module.split(".")
    return any(module == p or module.startswith(p + ".") for p in NEUTRAL_PREFIXES) or (
        parts[0] == "supervisor" and parts[-1] in NEUTRAL_SCREENS
    )


def engine_words(path: Path) -> list[tuple[int, str]]:
    """(line, word) of every engine word in the code of ``path``: its strings (not docstrings)
    and names (identifiers, attributes, arguments)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    docs = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
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
    """Where the user-facing ``jobq`` package sits: it imports ``shared`` and
    ``worker`` (never an engine), ``supervisor`` only lazily: in ``jobq/__main__.py`` (the
    command), and ``supervisor.api`` in ``jobq/__init__.py`` (``jobq.Supervisor``, the embedding
    API); no runtime package imports ``jobq`` (a worker serves tasks without it)."""
    out: dict[tuple[str, int], str] = {}
    for path in sorted((root / "jobq").rglob("*.py")):
        where = str(path.relative_to(root))
        name = "jobq" if path.name == "__init__.py" else f"jobq.{path.stem}"
        tree = ast.parse(path.read_text(encoding="utf-8"), where)
        top_level = {n.lineno for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
        for line, target in imports(name, path):
            if target.startswith(ENGINES) and not _engines_module(root, target):
                out.setdefault(
                    (where, line),
                    f"{where}:{line}: imports {target}: only the engine factory imports an engine",
                )
            elif target.split(".")[0] == "supervisor" and not _lazy_supervisor(
                where, target, line in top_level
            ):
                out.setdefault(
                    (where, line),
                    f"{where}:{line}: imports {target}: jobq imports "
                    f"supervisor only lazily, in jobq/__main__.py (and supervisor.api "
                    f"in jobq/__init__.py)",
                )
    for name, path in modules(root).items():
        for line, target in imports(name, path):
            if target.split(".")[0] == "jobq":
                where = str(path.relative_to(root))
                out.setdefault(
                    (where, line),
                    f"{where}:{line}: imports {target}: the runtime packages never import jobq",
                )
    return list(out.values())


def _lazy_supervisor(where: str, target: str, top_level: bool) -> bool:
    """May this jobq module import ``target`` (a supervisor module) where it does?"""
    if top_level:
        return False
    embedding = target == "supervisor.api" or target.startswith("supervisor.api.")
    return where == "jobq/__main__.py" or (where == "jobq/__init__.py" and embedding)


def _engines_module(root: Path, target: str) -> bool:
    """Is ``target`` one of the engines room's own modules (``shared.engines.contract``,
    ``shared.engines.location``, ...), which every layer may import, rather than an engine?"""
    return (root / "shared" / "engines" / f"{target[len(ENGINES) :].split('.')[0]}.py").exists()


def empty_packages(root: Path, names: tuple[str, ...]) -> None:
    """A tree of empty packages under ``root``, for the checks' own tests."""
    for pkg in names:
        (root / pkg).mkdir()
        (root / pkg / "__init__.py").write_text("")


def test_jobq_imports_shared_and_worker_and_supervisor_only_for_its_command():
    assert (REPO / "jobq" / "__init__.py").exists()
    assert jobq_violations(REPO) == []


@pytest.mark.parametrize(
    "path, text, named",
    [
        ("jobq/x.py", "from supervisor.cli import main\n", "only lazily"),
        ("jobq/__main__.py", "from supervisor.cli import main\n", "only lazily"),
        ("jobq/x.py", "def f():\n    import supervisor\n", "only lazily"),
        ("jobq/__init__.py", "from supervisor.api import Supervisor\n", "only lazily"),
        ("jobq/__init__.py", "def f():\n    from supervisor.cli import main\n", "only lazily"),
        ("jobq/x.py", "from shared.engines.sqlite import store\n", "only the engine factory"),
        ("shared/x.py", "def f():\n    import jobq\n", "never import jobq"),
        ("worker/x.py", "from jobq import task\n", "never import jobq"),
    ],
)
def test_the_jobq_check_finds_each_kind_of_breach(tmp_path, path, text, named):
    empty_packages(tmp_path, (*PACKAGES, "jobq"))
    (tmp_path / "jobq/__init__.py").write_text(
        "from shared.producer.api import JobQueue\nfrom worker import handler\n"
        "if TYPE_CHECKING:\n    from supervisor.api import Supervisor\n"
    )
    (tmp_path / "jobq/__main__.py").write_text("def main():\n    from supervisor.cli import main\n")
    assert jobq_violations(tmp_path) == []  # the allowed shapes pass
    (tmp_path / path).write_text(text)
    found = jobq_violations(tmp_path)
    assert len(found) == 1 and named in found[0] and path in found[0], found


def test_the_engines_and_the_factory_are_where_the_rules_expect_them():
    found = modules(REPO)
    assert FACTORY in found and ENGINES + "sqlite" in found and ENGINES + "postgres" in found
    named = {e for _, e in engine_names(found[FACTORY], {"sqlite", "postgres"})}
    assert named == {ENGINES + "sqlite", ENGINES + "postgres"}


def test_the_registry_maps_each_scheme_to_an_engine_package_that_exports_its_engine():
    """Every engine package under shared/engines is in the registry, and exports one ENGINE."""
    from shared import engines
    from shared.engines.engine import Engine

    packages = {
        ENGINES + p.parent.name
        for p in (REPO / "shared" / "engines").glob("*/__init__.py")
        if (p.parent / "store.py").exists()
    }
    assert set(engines.ENGINES.values()) == packages
    for scheme in engines.ENGINES:
        assert isinstance(engines.engine_for(scheme), Engine)
    from shared.settings.config import Config

    for engine in engines.engines():  # each engine's settings are a table of the config
        assert dataclasses.is_dataclass(engine.settings(Config())), engine.section


def engine_names(path: Path, engines: set[str]) -> list[tuple[int, str]]:
    """(line, engine package) of every string in a module that names a module of one of
    ``engines`` (``"shared.engines.sqlite"``, as ``importlib.import_module`` would take it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            eng = engine_of(node.value, engines)
            if eng is not None:
                out.append((node.lineno, eng))
    return out


def engine_branches(path: Path, names: set[str]) -> list[tuple[int, str]]:
    """(line, text) of every comparison with an engine's name or scheme (``engine == "sqlite"``,
    ``scheme in ("postgres", ...)``): the choice of an engine belongs to the registry."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for side in [node.left, *node.comparators]:
            values = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
            hit = [v.value for v in values if isinstance(v, ast.Constant) and v.value in names]
            if hit:
                out.append((node.lineno, ast.unparse(node)))
                break
    return out


def registry_violations(root: Path) -> list[str]:
    """An engine is chosen only by the registry (``shared/engines/__init__.py``): no
    module outside it names an engine module (a string for importlib), and no module outside
    the engines compares a value with an engine's name or scheme."""
    names = {"sqlite", "postgresql", "postgres"}
    engines = {p.parent.name for p in (root / "shared" / "engines").glob("*/__init__.py")}
    out = []
    for name, path in modules(root).items():
        where = str(path.relative_to(root))
        mine = engine_of(name, engines)
        if name != FACTORY:
            out += [
                f"{where}:{line}: names the engine module {eng}: only the registry ({FACTORY}) "
                f"imports an engine"
                for line, eng in engine_names(path, engines)
                if eng != mine
            ]
        if mine is None:
            out += [
                f"{where}:{line}: {text}: an engine is chosen by the registry ({FACTORY}), "
                f"not by comparing names"
                for line, text in engine_branches(path, names)
            ]
    return out


def test_only_the_registry_chooses_an_engine():
    assert registry_violations(REPO) == []


@pytest.mark.parametrize(
    "path, text, named",
    [
        (
            "supervisor/x.py",
            "import importlib\nE = importlib.import_module('shared.engines.sqlite.store')\n",
            "names the engine module",
        ),
        (
            "shared/x.py",
            "def f(t):\n    return 1 if t.engine == 'postgresql' else 2\n",
            "not by comparing names",
        ),
        ("worker/x.py", "def f(t):\n    return t.engine != 'sqlite'\n", "not by comparing names"),
        (
            "shared/engines/forkaware.py",
            "def f(s):\n    return s in ('postgres', 'x')\n",
            "not by comparing names",
        ),
    ],
)
def test_the_registry_check_finds_each_kind_of_breach(tmp_path, path, text, named):
    empty_packages(tmp_path, PACKAGES)
    for sub in ("shared/engines", "shared/engines/sqlite"):
        (tmp_path / sub).mkdir(exist_ok=True)
        (tmp_path / sub / "__init__.py").write_text("")
    (tmp_path / "shared/engines/__init__.py").write_text(
        "ENGINES = {'sqlite': 'shared.engines.sqlite'}\n"
    )
    (tmp_path / "shared/engines/sqlite/__init__.py").write_text(
        "E = 'shared.engines.sqlite.store'\ndef f(v):\n    return v == 'sqlite'\n"
    )
    assert registry_violations(tmp_path) == []  # the allowed shapes pass
    (tmp_path / path).write_text(text)
    found = registry_violations(tmp_path)
    assert len(found) == 1 and named in found[0] and path in found[0], found


@pytest.mark.parametrize(
    "path, text, named",
    [
        ("supervisor/x.py", "from worker.loop import Worker\n", "never import each other"),
        ("worker/x.py", "def f():\n    import supervisor.arbiter\n", "never import each other"),
        (
            "supervisor/x.py",
            "from shared.engines.sqlite import SqliteStore\n",
            "only the engine factory",
        ),
        (
            "shared/x.py",
            "from .engines.sqlite.store import SqliteStore\n",
            "only the engine factory",
        ),
        ("shared/engines/other/x.py", "from ..sqlite import wakeup\n", "only the engine factory"),
        ("worker/x.py", "import sqlite3\n", "sqlite3 outside the SQLite engine"),
        ("shared/x.py", "from sqlite3 import Connection\n", "sqlite3 outside the SQLite engine"),
        ("supervisor/x.py", "SQL = 'PRAGMA wal_checkpoint(TRUNCATE)'\n", "names a PRAGMA"),
        (
            "shared/x.py",
            "def f(store):\n    return store.conn.execute('SELECT 1')\n",
            "outside the engines",
        ),
        ("supervisor/x.py", "def f(store):\n    c = store.conn\n", "reads a store's connection"),
        (
            "supervisor/x.py",
            "def f(c):\n    c.executemany('DELETE FROM jobs', [])\n",
            "runs SQL (.executemany)",
        ),
        ("supervisor/x.py", "from shared.engines.sql import Dialect\n", "use the shared SQL layer"),
        (
            "worker/x.py",
            "def f():\n    from shared.engines.sql.jobs import JOB_COLUMNS\n",
            "use the shared SQL layer",
        ),
        ("supervisor/x.py", "from shared.engines.opsaccess import OpsAccess\n", "read layer's SQL"),
        ("worker/x.py", "from shared.engines import opsaccess\n", "read layer's SQL"),
        ("shared/engines/sql/x.py", "from ..sqlite import store\n", "only the engine factory"),
        ("shared/engines/sql/x.py", "import sqlite3\n", "sqlite3 outside the SQLite engine"),
        ("shared/engines/sql/x.py", "from psycopg.rows import dict_row\n", "names no driver"),
        ("shared/ops/x.py", "LABEL = 'WAL'\n", "names an engine ('WAL')"),
        (
            "supervisor/status.py",
            "def f(store):\n    return store.wal_bytes()\n",
            "names an engine ('wal_bytes')",
        ),
        (
            "supervisor/cli/top.py",
            "def f(snap):\n    return snap['wal_bytes']\n",
            "names an engine",
        ),
        ("supervisor/web/x.py", "import psycopg\n", "names an engine ('psycopg')"),
        ("supervisor/web/templates/x.html", "<span>WAL</span>\n", "names an engine ('WAL')"),
    ],
)
def test_the_check_finds_each_kind_of_breach(tmp_path, path, text, named):
    empty_packages(tmp_path, PACKAGES)
    for sub in (
        "shared/engines",
        "shared/engines/sqlite",
        "shared/engines/other",
        "shared/engines/sql",
        "shared/ops",
        "supervisor/cli",
        "supervisor/web",
        "supervisor/web/templates",
    ):
        (tmp_path / sub).mkdir(exist_ok=True)
        (tmp_path / sub / "__init__.py").write_text("")
    (tmp_path / "shared/engines/__init__.py").write_text("from .sqlite import store\n")
    (tmp_path / "shared/engines/sqlite/store.py").write_text(
        "import sqlite3\nfrom . import lead\n"
        "from ..sql import SqlBase\n"
        "X = 'PRAGMA busy_timeout = 0'\n"
    )
    (tmp_path / "shared/engines/other/store.py").write_text(
        "from ..sql import base\n"
    )  # the shared SQL: no engine
    (tmp_path / "shared/engines/sql/base.py").write_text(
        "def run(self, c):\n    return c.execute(self.conn)\n"
    )
    (tmp_path / "shared/ops/x.py").write_text("from ..engines.sql import Dialect\n")
    (tmp_path / "shared/ops/queue.py").write_text(
        '"""Explains SQLite\'s WAL."""\n# and psycopg here\nX = 1\n'
    )
    assert violations(tmp_path) == []  # the allowed shapes pass
    (tmp_path / path).write_text(text)
    found = violations(tmp_path)
    assert len(found) == 1 and named in found[0] and path in found[0], found


# -- three programs apart -------------------------------------------------------------------------
# supervisor/ holds three programs: the supervisor process (the modules of supervisor/ itself),
# the ops CLI (supervisor/cli) and the dashboard (supervisor/web); what the CLI and the dashboard
# both need is the ops layer (shared/ops) and the views that render it (supervisor/views). The CLI
# and the dashboard never import each other; the CLI loads the process only inside `run` and the
# dashboard only inside `web`; the views import none of the three programs; the process and the
# ops layer import neither program, and nothing in shared renders (imports the views).

CLI, WEB, OPS, VIEWS = "supervisor.cli", "supervisor.web", "shared.ops", "supervisor.views"
# kept command names that only start the CLI: ``python -m supervisor`` and the console script
# (supervisor.__main__:main), ``python -m supervisor.gendocs``
ENTRY_POINTS = {"supervisor.__main__", "supervisor.gendocs"}
LAZY = {(CLI, "process"): "cmd_run", (CLI, "web"): "cmd_web"}  # the one function each may do it in
NEVER = {
    ("web", "cli"),
    ("web", "process"),
    ("process", "cli"),
    ("process", "web"),
    ("views", "cli"),
    ("views", "web"),
    ("views", "process"),
    ("process", "views"),
}


def program_of(module: str) -> str | None:
    """'cli', 'web', 'views', 'process' (a supervisor process module), 'shared' or None (the
    ``supervisor`` package itself, the entry points, and what lies outside the runtime packages)."""
    for prefix, program in ((CLI, "cli"), (WEB, "web"), (VIEWS, "views")):
        if module == prefix or module.startswith(prefix + "."):
            return program
    if module.startswith("supervisor.") and module not in ENTRY_POINTS:
        return "process"
    return "shared" if module.split(".")[0] == "shared" else None


def enclosing_functions(path: Path) -> dict[int, str]:
    """Line of each import inside a function -> the innermost function's name."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    out = {}
    for fn in ast.walk(tree):  # breadth first: an inner function's name overwrites the outer one's
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.update(
                {
                    n.lineno: fn.name
                    for n in ast.walk(fn)
                    if isinstance(n, (ast.Import, ast.ImportFrom))
                }
            )
    return out


def program_violations(root: Path) -> list[str]:
    """One message per import that crosses between the programs where the rules above forbid."""
    out: dict[tuple[str, int], str] = {}
    for name, path in modules(root).items():
        mine, where = program_of(name), str(path.relative_to(root))
        inside = enclosing_functions(path)
        for line, target in imports(name, path):
            theirs = program_of(target)
            if mine == "shared" and target.split(".")[0] in ("supervisor", "worker"):
                out.setdefault(
                    (where, line),
                    f"{where}:{line}: imports {target}: shared (the ops layer "
                    f"{OPS} included) imports neither supervisor nor worker",
                )
            elif (mine, theirs) in NEVER:
                out.setdefault(
                    (where, line),
                    f"{where}:{line}: imports {target}: the {mine} program never "
                    f"imports the {theirs} program",
                )
            elif mine == "cli" and theirs in ("process", "web"):
                allowed = LAZY[(CLI, theirs)]
                if inside.get(line) != allowed:
                    out.setdefault(
                        (where, line),
                        f"{where}:{line}: imports {target}: the CLI loads the "
                        f"{theirs} program only inside {allowed}()",
                    )
    return list(out.values())


def test_the_three_programs_stay_apart():
    found = modules(REPO)
    assert {CLI, WEB, OPS, VIEWS, "supervisor.arbiter"} <= set(found)
    assert program_violations(REPO) == []


@pytest.mark.parametrize(
    "path, text, named",
    [
        ("supervisor/cli/x.py", "from supervisor.web import app\n", "only inside cmd_web()"),
        ("supervisor/cli/x.py", "from .. import web\n", "only inside cmd_web()"),
        (
            "supervisor/cli/x.py",
            "def cmd_run(a):\n    from ..web import app\n",
            "only inside cmd_web()",
        ),
        ("supervisor/cli/x.py", "from ..arbiter import Arbiter\n", "only inside cmd_run()"),
        (
            "supervisor/cli/x.py",
            "def cmd_status(a):\n    from supervisor import arbiter\n",
            "only inside cmd_run()",
        ),
        (
            "supervisor/cli/x.py",
            "def cmd_run(a):\n    def inner():\n        import supervisor.arbiter\n",
            "only inside cmd_run()",
        ),
        (
            "supervisor/web/x.py",
            "from ..cli import ops\n",
            "the web program never imports the cli program",
        ),
        (
            "supervisor/web/x.py",
            "def f():\n    from supervisor.cli.main import main\n",
            "never imports the cli",
        ),
        (
            "supervisor/web/x.py",
            "from supervisor.arbiter import Arbiter\n",
            "never imports the process",
        ),
        (
            "supervisor/arbiter.py",
            "from .cli import status\n",
            "the process program never imports the cli",
        ),
        (
            "supervisor/arbiter.py",
            "from .web import app\n",
            "the process program never imports the web",
        ),
        ("shared/ops/x.py", "from supervisor.cli import ops\n", "imports neither supervisor nor"),
        (
            "shared/ops/x.py",
            "def f():\n    import supervisor.metrics\n",
            "imports neither supervisor",
        ),
        (
            "shared/ops/x.py",
            "from supervisor.views import render\n",
            "imports neither supervisor nor",
        ),
        (
            "supervisor/views/x.py",
            "from supervisor.cli import ops\n",
            "the views program never imports",
        ),
        (
            "supervisor/views/x.py",
            "from ..web import app\n",
            "the views program never imports the web",
        ),
        ("supervisor/views/x.py", "from ..arbiter import Arbiter\n", "never imports the process"),
        (
            "supervisor/metrics.py",
            "from .views import render\n",
            "the process program never imports the",
        ),
        ("shared/x.py", "from worker import handler\n", "imports neither supervisor nor worker"),
    ],
)
def test_the_programs_check_finds_each_kind_of_breach(tmp_path, path, text, named):
    empty_packages(tmp_path, PACKAGES)
    for sub in ("supervisor/cli", "supervisor/web", "supervisor/views", "shared/ops"):
        empty_packages(tmp_path, (sub,))
    (tmp_path / "supervisor/__main__.py").write_text("from .cli import main\n")
    (tmp_path / "supervisor/gendocs.py").write_text("from .cli.gendocs import main\n")
    (tmp_path / "supervisor/metrics.py").write_text("from shared.ops.stats import BOUNDS\n")
    (tmp_path / "supervisor/cli/main.py").write_text(
        "from supervisor.views.context import Ctx\nfrom . import webcmd\n"
        "def cmd_run(args):\n    from ..arbiter import Arbiter\n"
    )
    (tmp_path / "supervisor/cli/webcmd.py").write_text(
        "def cmd_web(ctx, args):\n    from .. import web\n"
    )
    (tmp_path / "supervisor/web/pages.py").write_text(
        "from supervisor.views import snapshot\nfrom . import html\n"
    )
    (tmp_path / "supervisor/views/snapshot.py").write_text(
        "from shared.ops import stats\nfrom . import render\n"
    )
    assert program_violations(tmp_path) == []  # the allowed shapes pass
    (tmp_path / path).write_text(text)
    found = program_violations(tmp_path)
    assert len(found) == 1 and named in found[0] and path in found[0], found


PROBE = """\
import json, sys
from supervisor.cli import main
codes = [main(argv) for argv in json.loads(sys.argv[1])]
print(json.dumps({"codes": codes, "modules": sorted(sys.modules)}))
"""


def loaded_programs(modules_loaded: list[str]) -> dict[str, list[str]]:
    """The runtime modules a process had loaded, by program."""
    out: dict[str, list[str]] = {}
    for m in modules_loaded:
        if m.split(".")[0] == "supervisor":
            out.setdefault(program_of(m) or "supervisor", []).append(m)
    return out


def probe_config(tmp_path: Path, engine: Any) -> str:
    """A test config on ``engine``'s database (its own schema on PostgreSQL)."""
    from tests.proc import write_config

    extra = {"postgres": {"schema": engine.schema}} if engine.name == "postgresql" else {}
    return str(write_config(tmp_path, database=engine.database, **extra))


def test_the_ops_commands_load_neither_the_supervisor_process_nor_the_dashboard(tmp_path, engine):
    """`jobq status` (and the other ops commands) in a real process on a real database: the
    arbiter, the other process modules and the dashboard stay unloaded."""
    import json
    import subprocess
    import sys
    from tests.proc import env

    cfg = probe_config(tmp_path, engine)
    argvs = [
        ["enqueue", "--config", cfg, "report:make", "{}"],
        ["status", "--config", cfg],
        ["status", "--json", "--config", cfg],
        ["jobs", "--config", cfg],
        ["pause", "--config", cfg],
        ["resume", "--config", cfg],
        ["config", "show", "--config", cfg],
    ]
    p = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argvs)],
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    probe = json.loads(p.stdout.splitlines()[-1])
    assert probe["codes"] == [0] * len(argvs), p.stderr
    loaded = loaded_programs(probe["modules"])
    assert "supervisor.cli.status" in loaded["cli"]  # the commands ran
    assert "process" not in loaded and "web" not in loaded, loaded


def test_the_dashboard_loads_neither_the_cli_nor_the_supervisor_process(tmp_path, engine):
    """The dashboard's modules and an app that read a real database load no CLI module."""
    import json
    import subprocess
    import sys

    pytest.importorskip("starlette")
    from tests.proc import env

    cfg = probe_config(tmp_path, engine)
    script = (
        "import json, sys\nfrom shared.settings import config\n"
        "from supervisor.web.app import Settings, create_app\n"
        f"app = create_app(Settings(config.load({cfg!r}), {cfg!r}))\n"
        "app.state.backend.store().is_paused()\n"
        "app.state.backend.close()\nprint(json.dumps(sorted(sys.modules)))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    loaded = loaded_programs(json.loads(p.stdout.splitlines()[-1]))
    assert "supervisor.web.pages" in loaded["web"]
    assert "cli" not in loaded and "process" not in loaded, loaded


# -- the database-file watch is the engine's health check ----------------------------------------

FILE_NAMERS = ("shared.engines.database_file", "shared.dbfile")  # what names the database's file
MAY_NAME_THE_FILE = ("copycmd",)  # `jobq copy` refuses to copy a file onto itself


def file_watch_violations(root: Path) -> list[str]:
    """The supervisor and the worker learn whether the database is still the one they opened
    from ``shared.engines.health_check`` only: none of their modules asks for the database's
    file (``database_file``) or watches one itself (the engine's check does)."""
    out = []
    for name, path in modules(root).items():
        if name.split(".")[0] not in ("supervisor", "worker") or name.endswith(MAY_NAME_THE_FILE):
            continue
        for line, target in imports(name, path):
            if target in FILE_NAMERS:
                out.append(
                    f"{path.relative_to(root)}:{line}: imports {target}: ask the engine's "
                    f"health check (shared.engines.health_check) instead"
                )
    return out


def test_the_supervisor_and_the_worker_name_no_database_file():
    assert file_watch_violations(REPO) == []


@pytest.mark.parametrize(
    "path, text",
    [
        ("supervisor/x.py", "from shared.engines import database_file, open_store\n"),
        ("worker/x.py", "def f():\n    from shared import dbfile\n"),
    ],
)
def test_the_file_watch_check_finds_a_file_named(tmp_path, path, text):
    finds_one_breach(
        tmp_path,
        file_watch_violations,
        {
            "supervisor/copycmd.py": "from shared.engines import database_file\n",
            "worker/ok.py": "from shared.engines import health_check\n",
        },
        path,
        text,
    )


def finds_one_breach(root: Path, check: Any, allowed: dict[str, str], path: str, text: str) -> None:
    """``check`` finds nothing in packages holding the ``allowed`` files, then exactly one
    violation, in ``path``, once ``path`` holds ``text``."""
    empty_packages(root, PACKAGES)
    for name, body in allowed.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body)
    assert check(root) == []
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)
    found = check(root)
    assert len(found) == 1 and path in found[0], found


TRACING = "shared.telemetry.tracing"  # the one module that may use OpenTelemetry, lazily


def otel_violations(root: Path) -> list[str]:
    """Only ``shared.telemetry.tracing`` imports ``opentelemetry``, and only inside its functions
    (run where the application already traces), so jobq's import graph has none of it."""
    out = []
    for name, path in modules(root).items():
        top = {
            n.lineno
            for n in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(n, (ast.Import, ast.ImportFrom))
        }
        for line, target in sorted(set((ln, t.split(".")[0]) for ln, t in imports(name, path))):
            if target != "opentelemetry":
                continue
            if name != TRACING:
                out.append(f"{path.relative_to(root)}:{line}: imports {target}: only {TRACING} may")
            elif line in top:
                out.append(
                    f"{path.relative_to(root)}:{line}: imports {target} at module level: "
                    f"import it inside the function that needs it"
                )
    return out


def test_only_the_tracing_module_uses_opentelemetry_and_lazily():
    assert otel_violations(REPO) == []


@pytest.mark.parametrize(
    "path, text",
    [
        ("worker/x.py", "def f():\n    from opentelemetry import trace\n"),
        ("shared/telemetry/tracing.py", "import opentelemetry.trace\n"),
        ("supervisor/x.py", "from opentelemetry.sdk.trace import TracerProvider\n"),
    ],
)
def test_the_otel_check_finds_each_kind_of_breach(tmp_path, path, text):
    finds_one_breach(
        tmp_path,
        otel_violations,
        {"shared/telemetry/tracing.py": "def f():\n    from opentelemetry import trace\n"},
        path,
        text,
    )


# -- the rooms of shared ---------------------------------------------------------------------------
# shared/ is in rooms (docs/internals.md): the producer side (what an application calls) is no
# part of a worker, and the renderers of the CLI and the dashboard live beside them (VIEWS).

PRODUCER = "shared.producer"


def room_violations(root: Path) -> list[str]:
    """A worker module imports nothing of the producer room; no module of shared renders (a
    ``view*`` or ``render*`` module): the renderers live in supervisor/views."""
    out: dict[tuple[str, int], str] = {}
    for name, path in modules(root).items():
        where, top = str(path.relative_to(root)), name.split(".")[0]
        if top == "worker":
            for line, target in imports(name, path):
                if _within(target, PRODUCER):
                    out.setdefault(
                        (where, line),
                        f"{where}:{line}: imports {target}: a worker "
                        f"never imports the producer side ({PRODUCER})",
                    )
        if top == "shared" and name.rpartition(".")[2].startswith(("view", "render")):
            out.setdefault((where, 0), f"{where}: renders in shared: the views live in {VIEWS}")
    return list(out.values())


def test_the_worker_never_imports_the_producer_and_shared_never_renders():
    found = modules(REPO)
    assert PRODUCER + ".api" in found and VIEWS + ".render" in found
    assert room_violations(REPO) == []


@pytest.mark.parametrize(
    "path, text",
    [
        ("worker/x.py", "from shared.producer.api import JobQueue\n"),
        ("worker/x.py", "def f():\n    from shared import producer\n"),
        ("worker/x.py", "import shared.producer.tasks\n"),
        ("shared/ops/viewx.py", "X = 1\n"),
        ("shared/model/render.py", "X = 1\n"),
    ],
)
def test_the_rooms_check_finds_each_kind_of_breach(tmp_path, path, text):
    finds_one_breach(
        tmp_path,
        room_violations,
        {
            "worker/ok.py": "from shared.execution import runner\n",
            "supervisor/views/render.py": "from shared.ops import stats\n",
        },
        path,
        text,
    )
