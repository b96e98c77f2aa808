"""The tests' own layout: every test module lives in a folder that says what it tests,
and every behaviour suite runs on each engine (``pytestmark = pytest.mark.engines``, see
tests/conftest.py); a test of one engine only there says why (``engine_only(..., reason=...)``,
checked when the tests are collected)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = (
    next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists()) / "tests"
)
FOLDERS = ("unit", "engines", "behaviour", "process", "proofs")


def on_each_engine(path: Path) -> bool:
    """Does the module run its tests per engine: ``pytestmark = pytest.mark.engines`` (the
    ``database`` fixture), or the ``engine`` fixture (tests/engines/__init__.py's engines)?"""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == "pytestmark" for t in node.targets
        ):
            if "mark.engines" in ast.unparse(node.value):
                return True
    return any(
        isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
        and any(a.arg == "engine" for a in n.args.args)
        for n in ast.walk(tree)
    )


def test_every_behaviour_suite_runs_on_each_engine():
    suites = sorted((TESTS / "behaviour").glob("test_*.py"))
    assert len(suites) >= 10
    assert [p.name for p in suites if not on_each_engine(p)] == []


def test_test_modules_live_in_the_folders_by_what_they_test():
    """New test files may land at the top of tests/ from branches of their time: this names them."""
    stray = [
        str(p.relative_to(TESTS))
        for p in TESTS.rglob("test_*.py")
        if p.relative_to(TESTS).parts[0] not in FOLDERS
    ]
    assert stray == [], f"move these into one of {FOLDERS} (docs/internals.md, Tests)"


# --- Unit modules mirror the core -----------------------------------------------------------
# Each core module with logic of its own (a function, or a class with methods other than a
# Protocol) has a unit test module beside the behaviour suites: for ``<pkg>/.../<room>/<m>.py``
# a ``test_<m>.py`` or ``test_<m>_<what>.py`` in the folder of tests/unit that mirrors its
# package (``supervisor/cli`` -> tests/unit/cli, ``supervisor/web`` -> tests/unit/web, else
# tests/unit/<pkg>), or ``test_<room>_<m>.py`` (required when two modules of one folder share
# a name: ``test_model_flows.py``, not ``test_flows.py``). The engines' SQL modules
# (shared/engines/{sql,sqlite,postgres}) are left to tests/engines, the storage suite every
# engine runs. The lists below name every other exception, and the test fails when one of them
# goes stale (the module gained its own unit module, lost its logic, or no longer exists).
CORE = ("shared", "worker", "supervisor")
ENGINE_SQL = ("shared/engines/sql/", "shared/engines/sqlite/", "shared/engines/postgres/")

# Tested in a unit module named otherwise (several small modules in one file, or through their
# program: the CLI's modules by running ``jobq`` commands, the dashboard's by its app): the
# module and the file that covers it.
UNIT_ELSEWHERE = {
    # the upkeep task's scope check, with the upkeep that runs the tasks
    "shared/engines/upkeep.py": "tests/unit/supervisor/test_upkeep.py",
    "shared/_moved.py": "tests/unit/shared/test_moved.py",
    "shared/__init__.py": "tests/unit/shared/test_moved.py",  # the old import paths
    "shared/execution/outcomes.py": "tests/unit/shared/test_stopping.py",
    "shared/execution/progress.py": "tests/unit/shared/test_hotpath.py",
    "shared/ops/stats.py": "tests/unit/cli/test_ops_units.py",
    "shared/producer/typecheck.py": "tests/unit/cli/test_strict_types.py",
    "shared/producer/taskrun.py": "tests/unit/shared/test_current.py",  # a task's run in a worker
    "supervisor/cli/schedulescmd.py": "tests/unit/cli/test_status_schedules.py",
    "shared/settings/schema.py": "tests/unit/shared/test_config.py",
    "shared/settings/sections.py": "tests/unit/shared/test_config.py",
    "shared/settings/enginesections.py": "tests/unit/shared/test_config.py",
    "supervisor/__main__.py": "tests/unit/supervisor/test_launch.py",
    "supervisor/boot.py": "tests/unit/supervisor/test_arbiter_parts.py",
    "supervisor/controls.py": "tests/unit/supervisor/test_control_reads.py",
    "supervisor/children.py": "tests/unit/supervisor/test_arbiter_parts.py",
    "supervisor/dispatch.py": "tests/unit/supervisor/test_arbiter_parts.py",
    "supervisor/duties.py": "tests/unit/supervisor/test_arbiter_parts.py",
    "supervisor/exposition.py": "tests/unit/supervisor/test_metrics_text.py",
    "supervisor/outage.py": "tests/unit/supervisor/test_arbiter_parts.py",
    "supervisor/relay.py": "tests/proofs/test_pooler.py",
    "supervisor/reload.py": "tests/unit/supervisor/test_arbiter_parts.py",
    "supervisor/slots.py": "tests/unit/supervisor/test_arbiter_parts.py",
    "supervisor/cli/args.py": "tests/unit/cli/test_cli.py",
    "supervisor/cli/configcmd.py": "tests/unit/cli/test_cli.py",
    "supervisor/cli/configdoc.py": "tests/unit/shared/test_config.py",
    "supervisor/cli/control.py": "tests/unit/cli/test_cli.py",
    "supervisor/cli/copycmd.py": "tests/unit/cli/test_cli_flows.py",
    "supervisor/cli/enqueuecmd.py": "tests/unit/cli/test_cli.py",
    "supervisor/cli/gendocs.py": "tests/unit/shared/test_config.py",
    "supervisor/cli/main.py": "tests/unit/cli/test_cli.py",
    "supervisor/cli/template.py": "tests/unit/cli/test_ops_units.py",
    "supervisor/cli/tomledit.py": "tests/unit/cli/test_ops_units.py",
    "supervisor/cli/webcmd.py": "tests/unit/cli/test_cli.py",
    "supervisor/views/actions.py": "tests/unit/cli/test_id_resolver.py",
    "supervisor/views/cells.py": "tests/unit/cli/test_ops_units.py",  # through render
    "supervisor/views/context.py": "tests/unit/cli/test_cli.py",  # every command gets one
    "supervisor/views/render.py": "tests/unit/cli/test_status_display.py",
    "supervisor/views/snapshot.py": "tests/unit/cli/test_status_display.py",
    "supervisor/web/__init__.py": "tests/unit/web/test_web.py",
    "supervisor/web/actions.py": "tests/unit/web/test_web.py",
    "supervisor/web/app.py": "tests/unit/web/test_web.py",
    "supervisor/web/filters.py": "tests/unit/web/test_web.py",
    "supervisor/web/html.py": "tests/unit/web/test_web.py",
    "supervisor/web/overview.py": "tests/unit/web/test_web.py",
    "supervisor/web/pages.py": "tests/unit/web/test_web.py",
    "worker/aiojob.py": "tests/unit/worker/test_aiocancel.py",
    "worker/checkin.py": "tests/unit/worker/test_aiocancel.py",
    "worker/deadline.py": "tests/unit/shared/test_stopping.py",
    "worker/forkserver.py": "tests/unit/worker/test_worker_start.py",
    "worker/inflight.py": "tests/unit/worker/test_aio_parts.py",
    "worker/looplag.py": "tests/unit/worker/test_aio_parts.py",
}

# Logic that only means something against a database, real processes or a whole worker: the
# suite that exercises it, and why a unit module would add nothing.
COVERED_ELSEWHERE = {
    # engine plumbing: every engine runs it in tests/engines
    "shared/engines/__init__.py": "the registry: tests/engines/test_engine_registry.py",
    "shared/engines/engine.py": "the frozen Engine: tests/engines/test_engine_registry.py",
    "shared/engines/location.py": "database URLs and files: tests/engines/test_engine_registry.py",
    "shared/engines/idlelead.py": "leadership over a database: tests/engines/test_lead*.py",
    "shared/engines/transfer.py": "copying between databases: tests/engines/test_copy*.py",
    # the read layer: SQL through the store, read on both engines
    "shared/ops/activity.py": "tests/engines/test_activity.py",
    "shared/ops/browse.py": "tests/engines/test_browse.py",
    "shared/ops/bulk.py": "bulk writes: tests/engines/test_bulk.py, test_admin.py",
    "shared/ops/served.py": "tests/behaviour/test_api.py (who serves what, read from a store)",
    "shared/ops/history.py": "the attempt feed: tests/engines/test_admin.py",
    "shared/ops/jobs.py": "listings, lookups: tests/engines/test_admin.py, test_store_contract.py",
    "shared/ops/queue.py": "counts and failures: tests/engines/test_counts.py, test_admin.py",
    "shared/ops/scale.py": "control rows: tests/engines/test_admin.py",
    "shared/ops/workers.py": "the process table: tests/engines/test_store_contract.py",
    "shared/ops/queues.py": "per-queue reads: tests/behaviour/test_queues.py",
    # pure functions whose unit tests live in the behaviour suite of their feature
    "shared/model/queues.py": "plan, slot_queues, QueueOrder: tests/behaviour/test_queues.py",
    "shared/model/unserved.py": "served_queues and the warning: tests/behaviour/test_queues.py",
    "shared/execution/builtin_jobs.py": "its payload and run: tests/behaviour/test_retention.py",
    # a whole process: forks, signals, kills (tests/process, tests/proofs)
    "supervisor/__init__.py": "running a supervisor: tests/process/test_supervisor.py",
    "supervisor/forkserver.py": "forking workers: tests/process/test_forkserver.py",
    "supervisor/spawner.py": "spawning workers: tests/process/test_supervisor.py",
    "supervisor/statedir.py": "the state folder of a running supervisor: tests/process",
    "worker/__main__.py": "the worker program: tests/process/test_startup.py",
    "worker/fence.py": "self-fencing under a lost database: tests/proofs/test_multihost.py",
    # a whole worker on a store (tests/behaviour, both engines)
    "worker/loop.py": "the claim-run-commit loop: tests/behaviour/test_worker.py",
    "shared/producer/api.py": "the queue API: tests/behaviour/test_api.py",
    "shared/producer/inline.py": "inline runs: tests/behaviour/test_inline.py",
    "shared/producer/cancels.py": "each CancelResult on a store: tests/behaviour/test_cancel.py",
    "supervisor/api.py": "the embedded Supervisor: tests/process/test_embedding.py",
}

# Not yet covered by a unit module: logic of its own, exercised only through the behaviour,
# engines or process suites so far. Shrink this list; never grow it.
NOT_YET: set[str] = set()


def has_logic(path: Path) -> bool:
    """Does the module define a function, or a class with methods that is not a Protocol?"""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return True
        protocol = any("Protocol" in ast.unparse(b) for b in getattr(node, "bases", ()))
        if isinstance(node, ast.ClassDef) and not protocol:
            if any(isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) for m in node.body):
                return True
    return False


def core_modules() -> dict[str, Path]:
    root = TESTS.parent
    found = {}
    for pkg in CORE:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if not rel.startswith(ENGINE_SQL):
                found[rel] = path
    return found


def mirror_folder(rel: str) -> Path:
    parts = rel.split("/")
    if parts[0] == "supervisor" and len(parts) > 2 and parts[1] in ("cli", "web"):
        return TESTS / "unit" / parts[1]
    return TESTS / "unit" / parts[0]


def unit_module_of(rel: str, modules: dict[str, Path]) -> Path | None:
    """The unit test module that mirrors the core module ``rel`` (see above), or None."""
    folder = mirror_folder(rel)
    stem, room = Path(rel).stem, Path(rel).parent.name
    namesakes = [r for r in modules if Path(r).stem == stem and mirror_folder(r) == folder]
    shared_name = len(namesakes) > 1
    for test in sorted(folder.rglob("test_*.py")):
        name = test.stem
        if name == f"test_{room}_{stem}" or name.startswith(f"test_{room}_{stem}_"):
            return test
        if not shared_name and (name == f"test_{stem}" or name.startswith(f"test_{stem}_")):
            return test
    return None


def test_every_core_module_with_logic_has_a_unit_module():
    modules = core_modules()
    excused = set(UNIT_ELSEWHERE) | set(COVERED_ELSEWHERE) | NOT_YET
    missing = [
        rel
        for rel, path in modules.items()
        if has_logic(path) and rel not in excused and unit_module_of(rel, modules) is None
    ]
    assert missing == [], (
        "write a unit module for each (tests/unit/<package>/test_<module>.py), "
        "or say where it is covered and why in UNIT_ELSEWHERE/COVERED_ELSEWHERE"
    )


def test_the_exceptions_to_the_mirror_are_current():
    modules = core_modules()
    lists = (UNIT_ELSEWHERE, COVERED_ELSEWHERE, NOT_YET)
    named = [rel for names in lists for rel in names]
    assert len(named) == len(set(named)), "a module is named in two of the lists"
    stale = [
        rel
        for rel in named
        if rel not in modules or not has_logic(modules[rel]) or unit_module_of(rel, modules)
    ]
    assert stale == [], "these have a unit module of their own now, no logic, or no longer exist"
    gone = [test for test in UNIT_ELSEWHERE.values() if not (TESTS.parent / test).exists()]
    assert gone == []


def test_test_module_names_are_unique():
    """pytest imports test modules by their file name (tests/ has no packages): two of one name
    fail to collect together, so a unit module takes its room's name when a suite has its own
    (``test_model_limits.py`` beside tests/behaviour/test_limits.py)."""
    names = sorted(p.name for p in TESTS.rglob("test_*.py"))
    assert sorted({n for n in names if names.count(n) > 1}) == []
