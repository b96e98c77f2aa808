"""The supervisor's upkeep as a task list: each task on its interval, in list order,
the engine's own tasks between the supervisor's; the SQLite checkpoint task's decisions."""

from __future__ import annotations


import pytest

from shared.settings.config import Config
from shared.engines.contract import Round, UpkeepTask
from shared.engines import upkeep_tasks
from shared.engines.sqlite.upkeep import IDLE_CHECKPOINT_EVERY, Checkpointer, checkpoint_mode
from supervisor.upkeep import Upkeep


def rnd(t: float, busy: bool = False, store=None, config=None) -> Round:
    return Round(store, config or Config(), 1000.0 + t, t, busy)


def test_tasks_run_in_order_each_on_its_interval():
    ran = []
    up = Upkeep(
        [
            UpkeepTask("a", 0.0, lambda r: ran.append(("a", r.monotonic))),
            UpkeepTask("b", 10.0, lambda r: ran.append(("b", r.monotonic))),
        ]
    )
    for t in (0.0, 1.0, 9.0, 10.0, 11.0):
        up.run(rnd(t))
    assert ran == [
        ("a", 0.0),
        ("b", 0.0),
        ("a", 1.0),
        ("a", 9.0),
        ("a", 10.0),
        ("b", 10.0),
        ("a", 11.0),
    ]
    up.run_now("b", rnd(12.0))
    up.run(rnd(20.0))
    assert ran[-2:] == [("b", 12.0), ("a", 20.0)]  # run_now restarted b's interval
    assert up.names == ["a", "b"]


def test_a_task_sees_what_an_earlier_one_set():
    seen = []
    up = Upkeep(
        [
            UpkeepTask("recover", 0.0, lambda r: setattr(r, "busy", True)),
            UpkeepTask("after", 0.0, lambda r: seen.append(r.busy)),
        ]
    )
    up.run(rnd(0.0))
    assert seen == [True]


def test_the_sqlite_engine_adds_its_checkpoint_task():
    assert [t.name for t in upkeep_tasks(Config())] == ["wal_checkpoint"]


def test_checkpoint_mode():
    mb = 1 << 20
    assert checkpoint_mode(65 * mb, 64, idle=False) == "TRUNCATE"
    assert checkpoint_mode(10, 64, idle=True) == "PASSIVE"
    assert checkpoint_mode(10, 64, idle=False) is None
    assert checkpoint_mode(0, 64, idle=True) is None


class FakeStore:
    def __init__(self, size: int) -> None:
        self.size, self.modes = size, []

    def wal_bytes(self) -> int:
        return self.size

    def checkpoint(self, mode: str):
        self.modes.append(mode)
        return 0, 0, 0


def test_the_checkpointer_truncates_a_big_wal_and_waits_for_idle_otherwise():
    cfg = Config()
    big, small = FakeStore(cfg.sqlite.wal_checkpoint_mb * (1 << 20) + 1), FakeStore(100)
    task = Checkpointer()
    task(rnd(0.0, busy=True, store=big, config=cfg))
    assert big.modes == ["TRUNCATE"]
    task(rnd(1.0, busy=False, store=small, config=cfg))  # idle, but checkpointed 1 s ago
    task(
        rnd(IDLE_CHECKPOINT_EVERY + 0.5, busy=True, store=small, config=cfg)
    )  # long enough, but busy
    assert small.modes == []
    task(rnd(IDLE_CHECKPOINT_EVERY + 1.0, busy=False, store=small, config=cfg))
    assert small.modes == ["PASSIVE"]


def test_cluster_tasks_run_only_while_we_lead_and_stay_due_meanwhile():
    """A ``cluster`` task runs only in rounds whose election says we lead; skipped, it stays
    due, so a supervisor that takes the lead runs it at once. A failing election is reported
    as ``lead`` and the round runs as a follower's."""
    from shared.engines.contract import CLUSTER

    ran, lead = [], [False]

    def elect(r: Round) -> bool:
        if lead[0] is None:
            raise RuntimeError("database gone")
        return lead[0]

    up = Upkeep(
        [
            UpkeepTask("mine", 0.0, lambda r: ran.append(("mine", r.monotonic))),
            UpkeepTask("all", 10.0, lambda r: ran.append(("all", r.monotonic)), CLUSTER),
        ],
        elect,
    )
    assert up.run(rnd(0.0)) == [] and ran == [("mine", 0.0)]
    lead[0] = True
    up.run(rnd(5.0))  # took the lead: the cluster task at once
    assert ran[-2:] == [("mine", 5.0), ("all", 5.0)]
    lead[0] = None
    r = rnd(20.0)
    failed = up.run(r)
    assert [n for n, _ in failed] == ["lead"] and not r.lead and ran[-1] == ("mine", 20.0)
    lead[0] = False
    r = rnd(21.0)
    assert not up.elect(r)
    up.run_now("all", r)  # not ours: skipped
    assert ran[-1] == ("mine", 20.0)


def test_a_scope_is_host_or_cluster():
    with pytest.raises(ValueError, match="'x': scope 'everyone'"):
        UpkeepTask("x", 0.0, lambda r: None, "everyone")
