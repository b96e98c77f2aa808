"""supervisor.duties: the supervisor's touch of its process rows (every PROCESS_TOUCH_EVERY s)
sends one statement and reads no rows; this host's dead processes' rows are pruned (a read of
every row) every PROCESS_PRUNE_EVERY s, a task of its own."""

from __future__ import annotations

from types import SimpleNamespace

from shared.settings.config import from_dict
from supervisor.duties import Duties
from supervisor.upkeep import PROCESS_PRUNE_EVERY, PROCESS_TOUCH_EVERY


class Store:
    def __init__(self):
        self.calls = []

    def touch_process(self, token, now):
        self.calls.append("touch_process")

    def processes(self, kind=None):
        self.calls.append("processes")
        return []

    def process_ages(self, now):
        self.calls.append("process_ages")
        return {}


def test_a_touch_reads_no_rows_and_this_hosts_rows_are_pruned_rarely(tmp_path):
    store = Store()
    config = from_dict({"database": str(tmp_path / "q.db")})
    sup = SimpleNamespace(token="s", host="h", registry=object(), config=config, db=lambda: store)
    duties = Duties(sup)
    duties.recorded = sup.registry  # (the types served: recorded already)
    rnd = SimpleNamespace(store=store, now=1.0)
    duties.touch_processes(rnd)
    assert store.calls == ["touch_process"]
    duties.prune_here(rnd)
    assert store.calls[1:] == ["processes"]  # (this host's rows are judged by pid, not by age)
    every = {t.name: t.every for t in duties.tasks()}
    assert every["processes"] == PROCESS_TOUCH_EVERY
    assert every["prune_here"] == PROCESS_PRUNE_EVERY >= 4 * PROCESS_TOUCH_EVERY
