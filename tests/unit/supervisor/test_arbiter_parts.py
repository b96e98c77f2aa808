"""The arbiter's parts on their own: what each signal asks (``supervisor.dispatch``),
a slot's back-off after its worker ends (``supervisor.slots``), reading jobq.toml again
(``supervisor.reload``), the engine health check (``shared.engines.health_check``) and what
the supervisor does when the database is out of reach or replaced (``supervisor.outage``). The
processes around them: test_supervisor.py, test_db_file.py."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import pytest

from shared import JobQueue
from shared.settings import config as config_mod
from shared.settings.config import Config
from shared.engines import database_missing, health_check
from shared.model.errors import StoreUnavailable
from shared.model.exitcodes import ExitCode
from supervisor import reload
from supervisor.children import Slot, restart_delay
from supervisor.dispatch import dispatch
from supervisor.slots import EARLY_KILLS, HEALTHY_AFTER, Slots
from tests.proc import write_config


class Recorder:
    """A Controls that records what the signals asked."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.calls: list[tuple] = []

    def stop(self, why):
        self.calls.append(("stop", why))

    def set_paused(self, paused):
        self.calls.append(("paused", paused))

    def reload(self, why):
        self.calls.append(("reload", why))

    def scale(self, n, why):
        self.calls.append(("scale", n, why))


def test_each_signal_asks_for_its_action_in_order():
    rec = Recorder(target=0)
    dispatch(
        [
            signal.SIGUSR1,
            signal.SIGCHLD,
            signal.SIGHUP,
            signal.SIGTTIN,
            signal.SIGTTOU,
            signal.SIGUSR2,
            signal.SIGINT,
            signal.SIGTERM,
        ],
        rec,
    )
    assert rec.calls == [
        ("paused", True),
        ("reload", "SIGHUP"),
        ("scale", 1, "SIGTTIN"),
        ("scale", 0, "SIGTTOU"),  # never below 0 workers
        ("paused", False),
        ("stop", "SIGINT"),
        ("stop", "SIGTERM"),
    ]


def ended(slots: Slots, slot: Slot, code, sig, now, snapshot, target=4) -> bool:
    slot.pid = 12345  # a pid for the record only: nothing is signalled
    return slots.settle(slot, code, sig, now, snapshot, backoff_max=8.0, target=target)


def test_a_crash_loop_backs_off_and_a_clean_exit_resets_it(tmp_path):
    snapshot = str(tmp_path / "config.json")  # no progress file: the worker never got going
    slots = Slots()
    slots.fill(2)
    slot = slots.by_index[0]
    for n in range(1, 5):
        slot.started = 100.0
        assert ended(slots, slot, 1, None, 100.5, snapshot) is True
        assert slot.failures == n and slot.pid is None
        assert slot.next_start == pytest.approx(100.5 + restart_delay(n, 8.0))
    assert slot.next_start > 100.5  # backed off
    slot.started = 200.0
    assert ended(slots, slot, ExitCode.RECYCLED, None, 200.1, snapshot) is False
    assert slot.failures == 0 and slot.next_start == 200.1
    slot.started = 300.0
    assert ended(slots, slot, 1, None, 300.0 + HEALTHY_AFTER, snapshot) is True
    assert slot.failures == 1  # it had lived long: replaced at once


def test_early_sigkills_are_a_crash_loop_only_past_early_kills(tmp_path):
    snapshot = str(tmp_path / "config.json")
    slots = Slots()
    slots.fill(1)
    slot = slots.by_index[0]
    for n in range(1, EARLY_KILLS + 3):
        slot.started = 0.0
        ended(slots, slot, None, signal.SIGKILL, 0.1, snapshot)
        assert slot.early_kills == n
        assert slot.failures == (1 if n <= EARLY_KILLS else n - EARLY_KILLS + 1)


def test_a_worker_stopped_by_the_supervisor_is_no_crash_and_a_surplus_slot_goes(tmp_path):
    snapshot = str(tmp_path / "config.json")
    slots = Slots()
    slots.fill(3)
    slot = slots.by_index[2]
    slot.kill_reason = "timed out after 1 s"
    assert ended(slots, slot, None, signal.SIGKILL, 5.0, snapshot, target=2) is False
    assert 2 not in slots.by_index and slot.failures == 0
    assert [s.index for s in slots.due(3, 5.0)] == [0, 1, 2]  # scaled up again: a fresh slot 2
    assert [s.index for s in slots.due(1, 5.0)] == [0] and sorted(slots.by_index) == [0]


def test_reread_keeps_the_database_and_the_worker_override(tmp_path):
    path = write_config(tmp_path, supervisor={"workers": 2})
    running = config_mod.load(str(path))
    text = path.read_text().replace('database = "q.db"', 'database = "other.db"')
    path.write_text(text.replace("kill_grace = 1", "kill_grace = 3"))
    assert "other.db" in path.read_text() and "kill_grace = 3" in path.read_text()
    new = reload.reread(running.with_workers(5), running, 5, "SIGHUP")
    assert new is not None and new.registry is None
    assert new.config.database == running.database  # needs a restart
    assert new.config.supervisor.workers == 5 and new.override == 5  # the file kept its count
    assert new.changed == ["supervisor.kill_grace"]
    path.write_text(path.read_text().replace("workers = 2", "workers = 3"))
    new = reload.reread(new.config, new.file_config, 5, "SIGHUP")
    assert new.config.supervisor.workers == 3 and new.override is None  # the file's new count wins
    path.write_text("workers = [")
    assert reload.reread(new.config, new.file_config, None, "SIGHUP") is None


def test_a_reload_reads_a_file_saved_with_a_byte_order_mark_and_crlf(tmp_path):
    """A Windows editor's save (a UTF-8 byte-order mark, CRLF line ends) is applied, not refused
    as "Invalid statement (at line 1, column 1)"."""
    path = write_config(tmp_path, supervisor={"workers": 2})
    running = config_mod.load(str(path))
    text = path.read_text().replace("kill_grace = 1", "kill_grace = 3")
    path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode())
    new = reload.reread(running, running, None, "SIGHUP")
    assert new is not None and new.changed == ["supervisor.kill_grace"]


def test_the_config_watch_sees_an_edit_only_when_due(tmp_path):
    path = write_config(tmp_path)
    watch = reload.ConfigWatch(str(path))
    assert not watch.changed()
    path.write_text(path.read_text() + "\n# edited\n")
    assert watch.changed()
    assert not watch.due(0.0, 0)  # polling off
    assert watch.due(0.0, 1.0) and not watch.due(0.5, 1.0)  # then not again before 1 s
    watch.seen()
    assert not watch.due(1.0, 1.0)


def test_the_health_check_watches_the_file_where_the_engine_keeps_one(tmp_path):
    path = str(tmp_path / "q.db")
    cfg = Config().replace(database=path)
    assert database_missing(cfg) == f"database {path} does not exist (deleted?)"
    JobQueue(path).close()
    assert database_missing(cfg) is None
    check = health_check(cfg)
    assert check is not None and check.problem() is None
    os.unlink(path)
    assert "was deleted" in check.problem()
    pg = Config().replace(database="postgresql://jobq:secret@127.0.0.1/test")
    assert health_check(pg) is None and database_missing(pg) is None  # the server is the database
    assert health_check(Config().replace(database=":memory:")) is None


class _StartingTemplate:
    """A spawner whose template is still importing (its reply not in yet)."""

    def waiting(self) -> bool:
        return True

    def fds(self) -> list[int]:
        return []


def test_the_loop_sleeps_while_the_template_starts(tmp_path, monkeypatch):
    """Empty slots due since boot must not make each wait return at once while the template
    starts (the supervisor spun ~1,700 turns in 3 s, taking the template's CPU);
    once the template is ready they do."""
    from supervisor.arbiter import Arbiter

    arb = Arbiter(config_mod.load(write_config(tmp_path)))
    arb.slots.fill(2)  # due at once (next_start 0)
    arb.next_maintain = arb.clock.monotonic() + 60
    waits: list[float] = []
    monkeypatch.setattr(arb.signals, "wait", lambda timeout, extra=(): waits.append(timeout) or [])
    monkeypatch.setattr(arb, "spawner", _StartingTemplate())
    arb.wait()
    monkeypatch.setattr(_StartingTemplate, "waiting", lambda self: False)
    arb.wait()
    assert waits[0] > 0.5 and waits[1] == 0.0


class _ReadyTemplate:
    """A spawner whose template is ready: ``start`` records when it was asked for workers."""

    begun = True
    generation = 0

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def check(self, wait: float = 0.0) -> None:
        pass

    def waiting(self) -> bool:
        return False

    def after_boot(self, snapshot: str) -> None:
        pass

    def start(self, slots, token, now, reset_signals, before_exec=None) -> None:
        self.calls.append(f"spawn {len(slots)}")
        for slot in slots:
            slot.pid = os.getpid()  # (never signalled: the test stops at boot)


class _SlowTemplate(_ReadyTemplate):
    """A template still importing the handler modules: ready once the supervisor waits for it."""

    ready = False

    def check(self, wait: float = 0.0) -> None:
        self.calls.append(f"check {wait}")
        self.ready = self.ready or wait > 0

    def waiting(self) -> bool:
        return not self.ready


def test_a_starting_template_is_waited_for_before_the_first_recovery_and_the_full_round_after(
    tmp_path, monkeypatch
):
    """A template not ready when the database is open is waited for (up to BOOT_WAIT)
    and the first workers asked for before the boot's recovery, not after it; the first full
    upkeep round (the engine's tasks, schedules, ops requests) comes one interval after boot."""
    from supervisor import arbiter as arbiter_mod, boot as boot_mod, maintenance

    calls: list[str] = []
    monkeypatch.setattr(
        maintenance, "recover_foreign", lambda *a, **k: calls.append(f"recovery {a[7]}") or 0
    )
    cfg = config_mod.load(
        write_config(tmp_path, handlers=[], supervisor={"maintenance_interval": 30})
    )
    arb = arbiter_mod.Arbiter(cfg, spawner=_SlowTemplate(calls))
    try:
        assert arb.load() == ExitCode.OK
        # this host's owners, then (the lead was free: ours) other hosts'
        assert calls == [
            f"check {boot_mod.BOOT_WAIT}",
            "spawn 2",
            "recovery here",
            "recovery elsewhere",
        ]
        assert boot_mod.BOOT_WAIT > 0
        ran: list[str] = []
        monkeypatch.setattr(arb.upkeep, "run", lambda rnd: ran.append("round") or [])
        arb.maintain()  # the loop's first turn
        assert ran == [] and arb.next_maintain > arb.clock.monotonic() + 25
    finally:
        arb.close_db()
        arb.signals.close()


def test_workers_start_before_the_first_recovery_and_ready_waits_for_it(tmp_path, monkeypatch):
    """The first workers are asked for as soon as the database is open (schema checked)
    and the supervisor registered, not after its first recovery (dead owners' jobs re-queued),
    which they need not wait for; ``--ready-fd`` is still written only after that recovery."""
    from supervisor import arbiter as arbiter_mod, maintenance

    calls: list[str] = []
    monkeypatch.setattr(
        maintenance, "recover_foreign", lambda *a, **k: calls.append(f"recovery {a[7]}") or 0
    )
    r, w = os.pipe()
    arb = arbiter_mod.Arbiter(
        config_mod.load(write_config(tmp_path, handlers=[])),
        ready_fd=w,
        spawner=_ReadyTemplate(calls),
    )
    try:
        monkeypatch.setattr(arb, "notify_ready", lambda: calls.append("ready"))
        assert arb.load() == ExitCode.OK
        assert calls == ["spawn 2", "recovery here", "recovery elsewhere"]
        arb.respawn()  # the loop's first turn
        assert calls[-1] == "ready"
    finally:
        arb.close_db()
        arb.signals.close()
        os.close(r)
        os.close(w)
        if arb.snapshot_dir:
            import shutil

            shutil.rmtree(arb.snapshot_dir, ignore_errors=True)


def test_the_served_types_are_recorded_at_boot_and_again_only_after_a_reload_imports_new_ones(
    tmp_path, caplog
):
    """``Duties.record_served`` (the processes round at boot, every ops round after): one
    record per registry, what its modules serve with their handlers' queues; a reload's new
    registry is recorded at the next round, and the waiting jobs of a type nothing serves are
    logged (``supervisor.unserved_types``)."""
    from types import SimpleNamespace

    from shared.execution.handlers import HandlerSpec, Registry
    from shared.ops.served import served_types
    from supervisor.duties import Duties

    with JobQueue(str(tmp_path / "q.db")) as q:
        q.store.register_process("h:1:1", "supervisor", os.getpid(), "h", 0.0)
        q.enqueue_many([("b:new", {}), ("c:none", {})])
        spec = HandlerSpec("a:old", lambda payload, job: None, queue="qa")
        sup = SimpleNamespace(
            registry=Registry([spec]),
            token="h:1:1",
            db=lambda: q.store,
            config=Config(handlers=("mod_a",)),
        )
        duties = Duties(sup)  # type: ignore[arg-type]
        writes = []
        record = q.store.transaction
        q.store.transaction = lambda fn: (writes.append(fn), record(fn))[1]
        duties.record_served(q.store)
        duties.record_served(q.store)  # the same registry: nothing written again
        assert len(writes) == 1
        assert served_types(q.store).queues == {"a:old": "qa"}
        logged = [
            r.jobq_fields for r in caplog.records if r.getMessage() == "supervisor.unserved_types"
        ]
        assert [f["types"] for f in logged] == ["b:new:1,c:none:1"]
        sup.registry = Registry([HandlerSpec("b:new", lambda payload, job: None)])
        sup.config = Config(handlers=("mod_b",))
        duties.record_served(q.store)
        served = served_types(q.store)
        assert (served.modules, served.queues, len(writes)) == (["mod_b"], {"b:new": None}, 2)


class _Replaced:
    """A StoreRef whose health check finds the database replaced, once."""

    problem = None

    def replaced(self):
        if self.problem is not None:
            return None
        self.problem = "database q.db was deleted"
        return self.problem


def test_an_unreachable_database_backs_off_doubling_from_the_interval_up_to_the_cap():
    """``supervisor.outage``: each round the database is out of reach waits twice as long as
    the last, from maintenance_interval up to DB_BACKOFF_MAX, counted from that round."""
    from supervisor import outage

    cfg = Config()
    arb = SimpleNamespace(db_backoff=0.0, next_maintain=0.0, config=cfg)
    waits = []
    for _ in range(6):
        outage.unavailable(arb, 100.0, StoreUnavailable("down"))
        waits.append(arb.db_backoff)
    interval = cfg.supervisor.maintenance_interval
    assert waits[:2] == [interval, 2 * interval]
    assert waits[-1] == outage.DB_BACKOFF_MAX and sorted(waits) == waits
    assert arb.next_maintain == 100.0 + outage.DB_BACKOFF_MAX


def test_a_replaced_database_stops_the_supervisor_once_and_sets_its_exit_code():
    """``supervisor.outage``: the first time the database is found replaced, a running
    supervisor begins its stop and will exit DATABASE_UNAVAILABLE; every later check says so."""
    from supervisor import outage

    stops: list[str] = []
    arb = SimpleNamespace(
        dbref=_Replaced(),
        config=Config(),
        exit_code=ExitCode.OK,
        running=lambda: True,
        begin_stop=stops.append,
    )
    assert outage.check_health(arb) and outage.check_health(arb)
    assert stops == ["database replaced"] and arb.exit_code == ExitCode.DATABASE_UNAVAILABLE


def test_progress_marks_see_each_claim_of_a_child(tmp_path):
    """A follower reads the running jobs when a child claimed since its last look: the child's
    progress file (written at each claim) changed; a stat per child, no database."""
    from shared.execution.progress import ProgressWriter
    from supervisor.children import ProgressMarks, Slot, progress_path

    snapshot, slot = str(tmp_path / "config.json"), Slot(index=0, pid=1)
    marks = ProgressMarks()
    assert marks.changed(snapshot, [slot])  # the first look (a new slot set)
    assert not marks.changed(snapshot, [slot])
    writer = ProgressWriter(progress_path(snapshot, slot))
    try:
        assert marks.changed(snapshot, [slot])  # the worker started: its file is made
        writer.batch(["a", "b"])
        assert marks.changed(snapshot, [slot]) and not marks.changed(snapshot, [slot])
        writer.batch(["c"], completed=2)
        assert marks.changed(snapshot, [slot])
    finally:
        writer.close()
