"""When the supervisor reads controls (``supervisor.controls``): every round while nothing
listens; once it listens, once per notification and every backstop period; and its workers are
told through the file, which goes when it stops listening."""

from __future__ import annotations

import os

from shared.runtime.controlfile import control_path
from supervisor.controls import Controls


def test_every_round_reads_while_nothing_listens(tmp_path):
    c = Controls()
    c.heard(False, False, str(tmp_path))
    assert all(c.due("scale", t, 10.0) for t in (0.0, 0.1, 0.2))
    assert not os.path.exists(control_path(str(tmp_path)))


def test_a_listening_supervisor_reads_once_per_notification_and_at_the_backstop(tmp_path):
    folder, c = str(tmp_path), Controls()
    c.heard(True, True, folder)  # connected: what came before the LISTEN is looked for
    assert os.path.exists(control_path(folder))
    assert c.due("scale", 0.0, 10.0) and c.due("running", 0.0, 10.0)
    assert not c.due("scale", 1.0, 10.0) and not c.due("running", 1.0, 10.0)
    before = os.stat(control_path(folder)).st_ino
    c.heard(True, True, folder)  # a control came: each reader reads once, the file is new
    assert os.stat(control_path(folder)).st_ino != before
    assert c.due("scale", 2.0, 10.0) and not c.due("scale", 3.0, 10.0)
    assert c.due("running", 3.0, 10.0)
    assert c.due("scale", 12.0, 10.0)  # the backstop
    c.heard(True, False, folder)  # nothing new: nothing read, the file kept
    assert not c.due("scale", 13.0, 10.0) and os.path.exists(control_path(folder))
    c.heard(False, False, folder)  # the connection is down: every round reads, the file goes
    assert not os.path.exists(control_path(folder))
    assert c.due("scale", 13.1, 10.0) and c.due("scale", 13.2, 10.0)


def test_a_follower_whose_workers_hold_nothing_reads_the_running_jobs_only_when_told(tmp_path):
    """The follower's running-jobs read (cancels, timeouts, this host's silent owners): every
    round as the lead, or while jobs of this host run, or after a child claimed (its progress
    file changed); else once per control and every control_poll_interval."""
    from types import SimpleNamespace

    from shared.execution.progress import ProgressWriter
    from shared.settings.config import Config
    from supervisor.children import Slot, progress_path
    from supervisor.duties import Duties
    from supervisor.relay import Relay

    slot = Slot(index=0, pid=1)
    sup = SimpleNamespace(
        token="h:1:1",
        config=Config(),  # control_poll_interval: 10 s
        slots=SimpleNamespace(live=lambda: [slot]),
        snapshot=str(tmp_path / "config.json"),
        deaths=SimpleNamespace(unsettled={}),
        relay=Relay(),
    )
    duties, controls = Duties(sup), sup.relay.controls
    controls.heard(True, True, str(tmp_path))  # it listens (and looks once: just connected)

    def reads(t: float, lead: bool = False) -> bool:
        return duties.look_at_running(SimpleNamespace(lead=lead, monotonic=t))

    assert reads(0.0)  # the first round (jobs of this host may run)
    duties.host_running = False  # that read found none
    assert not reads(0.1) and not reads(5.0)
    assert reads(5.1, lead=True)  # the lead reads every round
    controls.heard(True, True, str(tmp_path))  # a control came
    assert reads(5.2) and not reads(5.3)
    writer = ProgressWriter(progress_path(sup.snapshot, slot))  # the child claimed
    try:
        writer.batch(["a"])
        assert reads(5.4) and not reads(5.5)
    finally:
        writer.close()
    assert not reads(15.3) and reads(15.4)  # the backstop: 10 s after the last read (5.4)
    sup.deaths.unsettled["x"] = object()  # a dead child's release left jobs: every round
    assert reads(15.5) and reads(15.6)


def test_a_lead_whose_last_read_found_nothing_running_reads_once_a_third_of_a_lease(tmp_path):
    """The lead reads the running jobs every round while any run (other hosts' leases are its
    business); once a read as the lead found none anywhere, every lease_timeout / 3 (a job
    claimed since then is seen at the next read, long before its lease could expire), or at
    once when a control comes; a supervisor that has just taken the lead reads at once."""
    from types import SimpleNamespace

    from shared.settings.config import from_dict
    from supervisor.duties import Duties
    from supervisor.relay import Relay

    sup = SimpleNamespace(
        token="h:1:1",
        host="h",
        config=from_dict({"worker": {"lease_timeout": 6.0, "heartbeat_interval": 0.5}}),  # 2 s
        slots=SimpleNamespace(live=lambda: []),
        snapshot=str(tmp_path / "config.json"),
        deaths=SimpleNamespace(unsettled={}),
        relay=Relay(),
    )
    duties, controls = Duties(sup), sup.relay.controls
    controls.heard(True, False, str(tmp_path))  # it listens
    groups: list = []
    asked: list = []
    store = SimpleNamespace(running_groups=lambda now: asked.append(now) or groups)
    sup.policy = SimpleNamespace(config=sup.config)

    def read_at(t: float, lead: bool = True) -> bool:
        """Whether the round at ``t`` read the running jobs (the timeouts task's first read)."""
        before = len(asked)
        duties.timeouts(SimpleNamespace(lead=lead, monotonic=t, now=t, store=store, busy=True))
        return len(asked) > before

    duties.host_running = False
    groups.append(SimpleNamespace(owner="other:1:2", oldest_lease=0.0, cancels=0))  # elsewhere
    assert read_at(0.0) and read_at(0.5) and read_at(1.0)  # every round while one runs
    groups.clear()
    assert read_at(1.5)  # this read finds none running anywhere
    assert not read_at(2.0) and not read_at(3.4)
    assert read_at(3.5)  # a third of the lease after the last read
    assert not read_at(4.0)
    controls.heard(True, True, str(tmp_path))  # a control came
    assert read_at(4.1) and not read_at(4.2)
    assert not read_at(6.0, lead=False)  # a follower: at its own backstop (10 s)
    assert read_at(6.1)  # the lead again, just taken: at once
