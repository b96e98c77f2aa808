"""Controls written on one session reach a running supervisor's host at once, and a slow read
backs them up: a cancel of a running job (its handler sees it through ``check_cancelled()``) and
a ``jobq scale`` request. ``[supervisor] control_poll_interval`` is 60 s in the tests that need
the notification (PostgreSQL: the supervisor's listening connection hears the control channel),
so only it can deliver the control in time; a control row written with plain SQL (no
notification) is still found by the backstop read (1 s there). On SQLite the controls are read
every round and at every check-in, as before: the same tests hold."""

from __future__ import annotations

import glob
import os
import tempfile
import time
from pathlib import Path

import pytest

from shared import JobQueue, ops
from shared.producer.cancels import CancelResult
from shared.runtime.clock import iso
from shared.settings.config import load
from tests.proc import db, events, wait_until, write_config

pytestmark = pytest.mark.engines  # on each engine

SLOW_BACKSTOP = 60.0  # far beyond every wait below: only a notification delivers in time
IN_TIME = 20.0  # what "at once" is allowed here (a loaded machine), a third of the backstop


def config(folder: Path, backstop: float, workers: int = 1) -> Path:
    return write_config(
        folder,
        handlers=["canceljobs"],
        log_format="json",
        supervisor={"workers": workers, "control_poll_interval": backstop},
        # the forced stop comes far later: the handler's own check must be what ends the job
        worker={"cancel_grace": 120},
    )


def row(cfg: Path, jid: str):
    with db(cfg) as c:
        return c.execute("SELECT status, progress FROM jobs WHERE id = ?", (jid,)).fetchone()


def stopped_by_its_handler(cfg: Path, log: Path, jid: str) -> None:
    """The job ends cancelled, its handler having seen the request (its ``finally`` ran)."""
    wait_until(lambda: row(cfg, jid)["status"] == "cancelled", timeout=IN_TIME, what="cancelled")
    assert [e["event"] for e in events(log) if e["job"] == jid] == ["start", "finally"]


def running_and_checked_in(q: JobQueue, cfg: Path, log: Path) -> str:
    """A ``cancel:quiet`` job running, whose worker has checked in once (its one progress report
    is stored: that check-in read the cancel requests, and the next reads wait for word)."""
    jid = q.enqueue("cancel:quiet", {"log": str(log)})
    wait_until(lambda: row(cfg, jid)["progress"] is not None, timeout=30, what="its check-in")
    return jid


def test_a_cancel_reaches_the_running_handler_long_before_the_backstop(
    tmp_path, sup_factory, database
):
    cfg = config(tmp_path, SLOW_BACKSTOP)
    log = tmp_path / "events.log"
    sup = sup_factory(cfg)
    with JobQueue(config=load(cfg)) as q:  # another session: any host's producer or CLI
        jid = running_and_checked_in(q, cfg, log)
        listening(sup, database)
        asked = time.monotonic()
        assert q.cancel(jid) is CancelResult.REQUESTED
        stopped_by_its_handler(cfg, log, jid)
    assert time.monotonic() - asked < SLOW_BACKSTOP / 3


def test_a_cancel_request_written_without_a_notification_is_found_by_the_backstop(
    tmp_path, sup_factory
):
    cfg = config(tmp_path, 1.0)
    log = tmp_path / "events.log"
    sup_factory(cfg)
    with JobQueue(config=load(cfg)) as q:
        jid = running_and_checked_in(q, cfg, log)
    with db(cfg) as c:  # the request as a row only: no notification goes out
        c.execute("UPDATE jobs SET cancel_requested_at = ? WHERE id = ?", (iso(time.time()), jid))
    stopped_by_its_handler(cfg, log, jid)


def supervisor_token(cfg: Path, sup) -> str:
    wait_until(lambda: "supervisor.started" in sup.output(), timeout=30, what="its boot")

    def token():
        with db(cfg) as c:
            got = c.execute("SELECT id FROM processes WHERE kind = 'supervisor'").fetchone()
        return got["id"] if got else None

    return wait_until(token, timeout=30, what="the supervisor's process row")


def word_file(sup) -> list[str]:
    """The supervisor's word to its workers (``shared.runtime.controlfile``), while it listens."""
    folders = os.path.join(tempfile.gettempdir(), f"jobq-supervisor-{sup.pid}-*", "controls")
    return glob.glob(folders)


def listening(sup, database) -> None:
    """On PostgreSQL, wait until the supervisor listens for controls (and has told its workers
    so); on SQLite it never does: controls are read every round."""
    if database.name == "postgresql":
        wait_until(lambda: word_file(sup), timeout=30, what="the supervisor listening")
    else:
        assert word_file(sup) == []


def test_a_scale_request_reaches_the_supervisor_long_before_the_backstop(
    tmp_path, sup_factory, database
):
    cfg = config(tmp_path, SLOW_BACKSTOP)
    sup = sup_factory(cfg)
    wait_until(lambda: len(sup.workers()) == 1, timeout=30, what="its first worker")
    token = supervisor_token(cfg, sup)
    listening(sup, database)
    with JobQueue(config=load(cfg)) as q:
        asked = time.monotonic()
        ops.request_scale(q.store, token, 2)
    wait_until(lambda: "supervisor.scaled" in sup.output(), timeout=IN_TIME, what="the scale")
    assert time.monotonic() - asked < SLOW_BACKSTOP / 3
    wait_until(lambda: len(sup.workers()) == 2, timeout=30, what="the second worker")


def test_a_scale_request_written_without_a_notification_is_found_by_the_backstop(
    tmp_path, sup_factory
):
    cfg = config(tmp_path, 1.0)
    sup = sup_factory(cfg)
    token = supervisor_token(cfg, sup)
    with db(cfg) as c:
        c.execute("INSERT INTO control (name, value) VALUES (?, '2')", (f"scale:{token}",))
    wait_until(lambda: "supervisor.scaled" in sup.output(), timeout=IN_TIME, what="the scale")
