"""The manual's Python code blocks (docs/*.md and README.md) compile, and run as written.

Every ```` ```python ```` block compiles. The blocks of a page then run, in order, in one
namespace (a module of its own), with the current directory a temporary folder that holds a
``jobq.toml`` on a SQLite file there:

- a block whose first line names a file (``# billing.py``, ``# myapp/jobs.py``) is that module:
  it is written into the folder before the page runs, imported, and listed in the config's
  ``handlers`` (a page without one lists the shipped ``examples.handlers`` and
  ``examples.tasks``, as the shipped jobq.toml does);
- ``q`` is a ``JobQueue`` on that config (it writes jobs; nothing runs them);
- the default queue of tasks (``jobq.configure``) runs each task at once (immediate mode, with
  the handlers of the page's modules and of its namespace, what a block defined or imported), so
  ``handle.wait()`` returns;
- a ``test_*`` function a block defines is called, with a fresh ``tmp_path`` if it asks for one.

A block that cannot run on its own (a fragment of a larger program, a settings file, code that
needs a running supervisor, a web request or another service) says so on the line before its
fence, with the reason: ``<!-- not run: needs a running supervisor -->``. It is still compiled.
docs/internals.md (Tests) describes the same convention.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomli_w

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())
PAGES = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
NOT_RUN = re.compile(r"^\s*<!-- not run: (.+?) -->\s*$")
MODULE = re.compile(r"^# ([A-Za-z_][\w/]*\.py)\b")
SHIPPED = ["examples.handlers", "examples.tasks"]
INTERNAL = {"shared", "worker", "supervisor"}  # importable, but the manual teaches only jobq
EXAMPLES = sorted((REPO / "examples").rglob("*.py"))


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    code: str
    not_run: str | None  # the reason given by the marker, if any

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def module(self) -> str | None:
        """The module this block is (``billing``, ``myapp.jobs``), if its first line names one."""
        m = MODULE.match(self.code)
        return m.group(1)[:-3].replace("/", ".") if m else None


def blocks(page: Path) -> list[Block]:
    """The ``python`` blocks of a page, dedented as a list item's are."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2), i
        i += 1
        while i < len(lines) and not FENCE.match(lines[i]):
            i += 1
        if lang == "python":
            marker = NOT_RUN.match(lines[start - 1]) if start else None
            code = "\n".join(ln[indent:] for ln in lines[start + 1 : i]) + "\n"
            found.append(Block(page, start + 1, code, marker.group(1) if marker else None))
        i += 1
    return found


ALL = [b for page in PAGES for b in blocks(page)]
RUN_PAGES = [p for p in PAGES if any(b.not_run is None for b in blocks(p))]


def test_the_manual_has_python_blocks_and_most_run():
    assert len(ALL) >= 40
    assert sum(b.not_run is None for b in ALL) > len(ALL) // 2


@pytest.mark.parametrize("block", ALL, ids=[b.where for b in ALL])
def test_every_block_compiles(block: Block):
    compile(block.code, block.where, "exec")


def test_a_marker_names_its_reason_and_sits_on_a_python_block():
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            if line.lstrip().startswith("<!-- not run"):
                assert NOT_RUN.match(line), f"{page.name}:{n + 1}: write <!-- not run: REASON -->"
                nxt = lines[n + 1] if n + 1 < len(lines) else ""
                assert FENCE.match(nxt) and FENCE.match(nxt).group(2) == "python", (
                    f"{page.name}:{n + 1}: the marker must be right before a ```python fence"
                )


def internal_imports(code: str, where: str) -> list[str]:
    """The imports in ``code`` of jobq's internal packages (``from worker import handler``)."""
    found = []
    for node in ast.walk(ast.parse(code, where)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{where}:{node.lineno}: {n}" for n in names if n.split(".")[0] in INTERNAL]
    return found


def test_every_block_imports_only_from_jobq():
    """What a user writes imports from ``jobq`` (and the standard library, third-party
    packages, the user's own modules): never ``shared``, ``worker`` or ``supervisor``."""
    found = [hit for b in ALL for hit in internal_imports(b.code, b.where)]
    assert found == [], "import these from jobq instead:\n" + "\n".join(found)


def test_the_examples_import_only_from_jobq():
    """The shipped examples (and their tests) are what users copy: they import only ``jobq``."""
    assert len(EXAMPLES) >= 5
    found = [
        hit
        for path in EXAMPLES
        for hit in internal_imports(path.read_text(encoding="utf-8"), str(path.relative_to(REPO)))
    ]
    assert found == [], "import these from jobq instead:\n" + "\n".join(found)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """The page's folder: the current directory, on sys.path, without the caller's config."""
    for name in ("JOBQ_CONFIG", "JOBQ_DATABASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


# the pages' job types are made up: a producer warns that no handler module serves them
@pytest.mark.filterwarnings("ignore::jobq.UnservedTypeWarning")
@pytest.mark.parametrize("page", RUN_PAGES, ids=[p.name for p in RUN_PAGES])
def test_page_runs(page: Path, folder: Path, tmp_path_factory, monkeypatch):
    import jobq
    from shared.producer import tasks

    page_blocks = [b for b in blocks(page) if b.not_run is None]
    modules = [b for b in page_blocks if b.module]
    for b in modules:
        path = folder / (b.module.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(b.code)
    handlers = [b.module for b in modules] or SHIPPED
    config = folder / "jobq.toml"
    config.write_text(tomli_w.dumps({"database": "jobq.db", "handlers": handlers}))
    name = "manual_" + re.sub(r"\W", "_", page.stem.lower())
    namespace = types.ModuleType(name)
    monkeypatch.setitem(sys.modules, name, namespace)
    opened: list = []

    def open_queue(**kwargs):
        opened.append(jobq.JobQueue.from_config(str(config), **kwargs))
        return opened[-1]

    namespace.q = open_queue()
    try:
        for b in modules:
            importlib.import_module(b.module)
        for b in page_blocks:
            if b.module:
                continue
            own = [*(b.module for b in modules), namespace]
            jobq.configure(open_queue(immediate=True, handlers=own))
            before = set(vars(namespace))
            exec(compile(b.code, b.where, "exec"), vars(namespace))
            for fname in sorted(set(vars(namespace)) - before):
                fn = getattr(namespace, fname)
                if fname.startswith("test_") and inspect.isfunction(fn):
                    params = inspect.signature(fn).parameters
                    wants = "tmp_path" in params
                    fn(**({"tmp_path": tmp_path_factory.mktemp(fname)} if wants else {}))
    finally:
        jobq.configure(None)
        if tasks._opened.queue is not None:  # a block's configure(None) made it open ./jobq.toml
            opened.append(tasks._opened.queue)
            tasks._opened.queue = None
        for q in opened:
            q.close()
        for b in modules:
            for mod in list(sys.modules):
                if mod == b.module or mod.startswith(b.module.split(".")[0] + "."):
                    sys.modules.pop(mod, None)
            sys.modules.pop(b.module.split(".")[0], None)
