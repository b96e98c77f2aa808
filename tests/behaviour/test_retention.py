"""Retention: [retention] settings, the built-in cleanup:old-data job, deletion in batches."""

from __future__ import annotations

import json

import signal
import sqlite3
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from shared.execution import builtin_jobs
from shared.settings import retention
from shared.engines.sqlite.bulk import PROBE, STEP, Pacer
from shared.runtime.clock import FakeClock, iso
from shared.model.job import new_id
from shared.settings.config import Config, ConfigError, RetentionConfig, from_dict, load
from shared.execution.handlers import PermanentError, load_registry
from shared.engines.contract import EngineStore
from shared.engines import open_store
from tests.engines import raw
from tests.proc import Running, db, wait_until, write_config

pytestmark = pytest.mark.engines  # the tests that use database (or store) run on each engine

DAY = 86400.0
NOW = FakeClock().now()
REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


@pytest.fixture
def store(database, tmp_path):
    config = database.config(tmp_path)
    s = open_store(config)
    s.raw = lambda: raw(config)  # a plain connection to its database, for rows written around jobq
    yield s
    s.close()


def add_finished(
    store: EngineStore, status: str, n: int, age_days: float, *, with_completed_at: bool = True
) -> None:
    """``n`` jobs that reached ``status`` ``age_days`` ago (cancelled ones may lack completed_at)."""
    t = iso(NOW - age_days * DAY)
    done = t if with_completed_at else None
    rows = [
        (
            new_id(),  # (an id as jobq writes them: PostgreSQL's ids are uuids)
            "t",
            status,
            "{}",
            t,
            done,
            t,
            t,
        )
        for i in range(n)
    ]
    with store.raw() as c:
        c.executemany(
            "INSERT INTO jobs (id, type, status, payload, run_at, completed_at, created_at, "
            "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )


def counts(store: EngineStore) -> dict[str, int]:
    return store.counts()


# -- settings --------------------------------------------------------------------------------------


def test_defaults_keep_completed_a_week_and_failed_forever():
    cuts = retention.cutoffs(Config().retention, NOW)
    assert cuts == {"completed": NOW - 7 * DAY, "cancelled": NOW - 7 * DAY, "failed": None}


def test_retention_days_overrides_completed_after_but_not_failed_after():
    settings = RetentionConfig(completed_after="30d", failed_after="90d")
    cuts = retention.cutoffs(settings, NOW, retention_days=2)
    assert cuts == {
        "completed": NOW - 2 * DAY,
        "cancelled": NOW - 2 * DAY,
        "failed": NOW - 90 * DAY,
    }
    assert retention.cutoffs(RetentionConfig(completed_after="never"), NOW)["completed"] is None


@pytest.mark.parametrize(
    "key, value",
    [
        ("completed_after", "7 days"),
        ("completed_after", 7),
        ("failed_after", "-1d"),
        ("failed_after", "forever"),
    ],
)
def test_bad_retention_names_key_value_and_expectation(key, value):
    with pytest.raises(
        ConfigError, match=rf"x.toml: key 'retention.{key}' = {value!r}: expected a duration"
    ):
        from_dict({"retention": {key: value}}, source="x.toml")
    with pytest.raises(ConfigError, match="unknown key 'retention.cancelled_after'"):
        from_dict({"retention": {"cancelled_after": "1d"}}, source="x.toml")


def test_shipped_config_schedules_cleanup_daily():
    cfg = load(REPO / "jobq.toml")
    [cleanup] = [s for s in cfg.schedules if s.type == "cleanup:old-data"]
    assert cleanup.cron.split()[2:] == ["*", "*", "*"]  # every day
    assert cfg.retention == RetentionConfig()


# -- deleting in batches ---------------------------------------------------------------------------


def test_purge_deletes_old_finished_jobs_in_bounded_chunks_and_keeps_the_rest(store):
    add_finished(store, "completed", 1234, age_days=8)
    add_finished(store, "completed", 10, age_days=6)
    add_finished(store, "cancelled", 7, age_days=8)
    add_finished(store, "cancelled", 3, age_days=8, with_completed_at=False)
    add_finished(store, "failed", 5, age_days=400)
    with store.raw() as c:
        c.execute(
            "INSERT INTO jobs (id, type, status, payload, run_at, created_at, updated_at) "
            "VALUES (?, 't', 'pending', '{}', ?, ?, ?)",
            (new_id(),) + (iso(NOW - 30 * DAY),) * 3,
        )
    statements: list[int] = []
    real = store.delete_finished_in

    def spy(c, cuts, after, chunk):
        deleted, nxt = real(c, cuts, after, chunk)
        statements.append(sum(deleted.values()))
        return deleted, nxt

    store.delete_finished_in = spy  # type: ignore[method-assign]
    fixed = Pacer(500, least=500, most=500, sleep=lambda s: None)
    deleted = retention.purge(store, retention.cutoffs(RetentionConfig(), NOW), pacer=fixed)
    assert deleted == {"completed": 1234, "cancelled": 10, "failed": 0}
    assert len(statements) == 3 and max(statements) <= 500  # 1,260 jobs, 500 per statement
    assert counts(store) == {"completed": 10, "failed": 5, "pending": 1}
    assert retention.purge(store, retention.cutoffs(RetentionConfig(failed_after="52w"), NOW)) == {
        "completed": 0,
        "cancelled": 0,
        "failed": 5,
    }


def test_purge_with_nothing_to_delete_reads_nothing(store):
    add_finished(store, "failed", 3, age_days=400)
    store.delete_finished_in = None  # type: ignore[assignment]  # must not be called
    assert retention.purge(
        store, retention.cutoffs(RetentionConfig(), NOW) | {"completed": None, "cancelled": None}
    ) == {"completed": 0, "cancelled": 0, "failed": 0}


@pytest.mark.engine_only("sqlite", reason="SQLite's one write lock (PostgreSQL locks rows)")
def test_the_write_lock_is_free_between_chunks_for_a_writer_that_waits(store, tmp_path):
    """A jobq writer that waits for the lock (its store stamped its want: ``wants``) gets it in
    the pause after the chunk in hand -- another connection that refuses to wait at all writes
    there -- and the pause ends once that writer is through; while none waits, no pause (but
    the probe pause every PROBE_EVERY seconds)."""
    add_finished(store, "completed", 1200, age_days=30)
    other = sqlite3.connect(str(tmp_path / "q.db"), isolation_level=None, timeout=0)
    waiter = type(store)(str(tmp_path / "q.db"))
    pauses = []

    def pause(seconds):
        other.execute("INSERT INTO control (name, value) VALUES (?, '1')", (f"w{len(pauses)}",))
        pauses.append(seconds)
        waiter.wants.done()

    pacer = Pacer(500, least=500, most=500, sleep=pause)
    waiter.wants.want()
    try:
        assert retention.purge(store, {"completed": NOW}, pacer=pacer) == {"completed": 1200}
    finally:
        other.close()
        waiter.close()
    assert len(pacer.held) == 3 and pauses[0] == STEP and pacer.paused[0] > 0
    assert all(p in (STEP, PROBE) for p in pauses)


@pytest.mark.engine_only("sqlite", reason="SQLite's query plan and trace callback")
def test_each_delete_statement_is_one_primary_key_range(store):
    plans = []
    store.conn.set_trace_callback(
        lambda s: plans.append(s) if s.startswith("DELETE FROM jobs") else None
    )
    add_finished(store, "completed", 3, age_days=30)
    store.purge_finished({"completed": NOW}, 10)
    store.conn.set_trace_callback(None)
    [sql] = set(plans)  # (traced again for each trigger it fires)
    plan = " | ".join(
        r["detail"] for r in store.conn.execute("EXPLAIN QUERY PLAN " + sql).fetchall()
    )
    # (a workflow's parent, has_children set, is also looked up among its children's edges)
    assert (
        plan.split(" | ")[0] == "SEARCH jobs USING INDEX sqlite_autoindex_jobs_1 (id>? AND id<?)"
    ), plan
    assert "SCAN" not in plan, plan


# -- the built-in job ------------------------------------------------------------------------------


def test_cleanup_is_registered_without_listing_a_module_and_a_module_may_replace_it(
    tmp_path, monkeypatch
):
    reg = load_registry([])
    assert reg.get("cleanup:old-data").fn is builtin_jobs.cleanup_old_data
    assert reg.get("cleanup:old-data").timeout == 3600
    (tmp_path / "mycleanup.py").write_text(
        "from worker import handler\n@handler('cleanup:old-data')\ndef mine(payload, job):\n    return 'mine'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_registry(["mycleanup"]).get("cleanup:old-data").fn.__name__ == "mine"


def ctx(config: Config) -> SimpleNamespace:
    import logging

    return SimpleNamespace(
        id="j",
        type="cleanup:old-data",
        attempt=1,
        max_attempts=3,
        config=config,
        logger=logging.getLogger("test"),
    )


def test_cleanup_handler_uses_the_config_and_retention_days(database, tmp_path, store):
    add_finished(store, "completed", 3, age_days=1000)  # NOW is the fake clock's 2026-01-01
    add_finished(store, "failed", 2, age_days=1000)
    config = database.config(tmp_path)
    assert builtin_jobs.cleanup_old_data({}, ctx(config)) == {
        "deleted": {"completed": 3, "cancelled": 0, "failed": 0}
    }
    add_finished(store, "completed", 4, age_days=1)
    result = builtin_jobs.cleanup_old_data({"retentionDays": 0}, ctx(config))
    assert result["deleted"]["completed"] == 4
    assert counts(store) == {"failed": 2}


@pytest.mark.parametrize(
    "payload",
    [
        {"retentionDays": -1},
        {"retentionDays": "7"},
        {"retentionDays": True},
        [1],
        {"retentionDays": float("inf")},
    ],
)
def test_cleanup_refuses_bad_retention_days_permanently(payload):
    with pytest.raises(PermanentError, match="retentionDays|payload must be an object"):
        builtin_jobs.cleanup_old_data(payload, ctx(Config()))


def test_cleanup_without_a_config_fails_permanently():
    with pytest.raises(PermanentError, match="needs the worker's config"):
        builtin_jobs.cleanup_old_data({}, SimpleNamespace(id="j"))


def test_a_real_worker_runs_the_built_in_cleanup(database, tmp_path):
    """A supervisor and its worker, with only the test handlers listed: cleanup:old-data is there."""
    config_path = write_config(
        tmp_path, supervisor={"workers": 1}, retention={"completed_after": "1d"}
    )
    open_store(load(config_path)).close()  # its tables
    with db(config_path) as c:
        NOW_REAL = time.time()
        t_old, t_new = iso(NOW_REAL - 3 * DAY), iso(NOW_REAL - 3600)
        kept = new_id()
        c.executemany(
            "INSERT INTO jobs (id, type, status, payload, run_at, completed_at, created_at, "
            "updated_at) VALUES (?, 't', 'completed', '{}', ?, ?, ?, ?)",
            [(new_id(), t_old, t_old, t_old, t_old) for i in range(600)]
            + [(kept, t_new, t_new, t_new, t_new)],
        )
    from shared import JobQueue

    with JobQueue(config=load(config_path)) as q:
        jid = q.enqueue("cleanup:old-data", {})
    sup = Running(config_path)
    try:

        def done():
            with db(config_path) as c:
                row = c.execute(
                    "SELECT status, result, error FROM jobs WHERE id = ?", (jid,)
                ).fetchone()
            return row if row["status"] in ("completed", "failed") else None

        row = wait_until(done, timeout=20, what="cleanup job finished")
        assert row["status"] == "completed", row["error"]
        assert json.loads(row["result"])["deleted"]["completed"] == 600
        with db(config_path) as c:
            assert [r[0] for r in c.execute("SELECT id FROM jobs WHERE type = 't'")] == [kept]
        sup.signal(signal.SIGTERM)
        assert sup.wait(20) == 0
    finally:
        sup.close()
