"""What ``status``, ``top``, the metrics and the dashboard show about the database
(cosmetics), on both engines: the WAL only where the engine has one, a schedule's last tick
only once one was enqueued, and an install hint for psycopg that works from a checkout."""

from __future__ import annotations

from shared.runtime.clock import SystemClock, iso
from shared.settings.config import load
from shared.model.job import NewJob, new_id
from shared.settings import cron
from supervisor.views import render
from supervisor.views import snapshot as status
from supervisor import metrics
from supervisor.scheduler import run_due
from supervisor.cli.top import TopView
from tests.proc import write_config

T0 = 1_800_000_000.0 + 1234.5  # no tick of "0 * * * *"


def test_the_wal_is_shown_only_where_the_engine_has_one(engine):
    store = engine.open()
    try:
        now = SystemClock().now()
        snap = status.collect(store, now, detail=True)
        text = render.status_text(snap)
        top = TopView(store, SystemClock(), 1.0)
        top.poll()
        exposition = metrics.exposition(store, now, None, {}, {}, now)
        if engine.name == "sqlite":
            assert isinstance(snap["wal_bytes"], int) and "(WAL " in text and "WAL " in top._title()
            assert "jobq_wal_bytes " in exposition
            assert "# HELP jobq_wal_bytes Size of the SQLite write-ahead log." in exposition
        else:  # the server's WAL is the cluster's: nothing of jobq's own to show as "0 B"
            assert (
                "wal_bytes" not in snap
                and snap["gauges"] == []
                and "WAL" not in text
                and "WAL" not in top._title()
            )
            assert "jobq_wal_bytes" not in exposition
            assert "jobq_paused 0" in exposition  # the other gauges are still there
    finally:
        store.close()


def test_a_schedule_shows_no_last_tick_until_one_is_enqueued(engine, tmp_path):
    config = engine.config(
        load(
            write_config(
                tmp_path,
                handlers=[],
                schedule=[
                    {"name": "hourly", "type": "report:run", "cron": "0 * * * *", "payload": {}}
                ],
            )
        )
    )
    store = engine.open(config)
    try:
        assert run_due(store, config, T0) == 0  # first seen: the database keeps T0 as the start
        snap = status.collect(store, T0, detail=True, config=config)
        assert snap["schedules"][0]["last_tick"] is None
        assert iso(T0) not in render.status_text(snap)
        tick = cron.next_after("0 * * * *", "UTC", T0)
        assert run_due(store, config, tick + 5) == 1
        snap = status.collect(store, tick + 5, detail=True, config=config)
        assert snap["schedules"][0]["last_tick"] == iso(tick)
    finally:
        store.close()


def test_the_psycopg_hint_names_what_can_be_installed():
    from shared.engines import POSTGRES_MISSING
    from shared.settings.config import Config

    assert (
        'pip install -e ".[postgres]"' in POSTGRES_MISSING
        and '"psycopg[binary]>=3.2"' in POSTGRES_MISSING
    )
    assert "jobq[postgres]" not in POSTGRES_MISSING  # no package of that name is published
    from shared.settings.config import SCHEMA

    assert "jobq[postgres]" not in SCHEMA[""]["database"].doc and Config().database


def test_top_and_the_metrics_name_a_queue_no_worker_serves(engine, tmp_path):
    config = engine.config(
        load(
            write_config(
                tmp_path, handlers=[], supervisor={"workers": 2}, queues={"reports": {"workers": 1}}
            )
        )
    )
    store = engine.open(config)
    try:
        now = SystemClock().now()
        store.enqueue(
            [
                NewJob(new_id(), "t", "{}", 0, now, None, None, queue=q)
                for q in ("newsletters", "newsletters", "reports")
            ],
            now,
        )
        top = TopView(store, SystemClock(), 1.0, config=config)
        top.poll()
        shown = [text for text, _ in top.lines(140)]
        assert "no worker serves queue newsletters: 2 pending" in shown
        assert not any(
            "serves queue reports" in line or "serves queue default" in line for line in shown
        )
        exposition = metrics.exposition(store, now, None, {}, {}, now, config)
        assert 'jobq_queue_unserved_pending{queue="newsletters"} 2' in exposition.splitlines()
        assert 'jobq_queue_unserved_pending{queue="reports"} 0' in exposition.splitlines()
        assert (
            "# HELP jobq_queue_unserved_pending Pending jobs of a named queue no worker serves"
            in exposition
        )
    finally:
        store.close()
