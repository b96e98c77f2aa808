"""worker.queues: a worker points its store at its slot's queues, and takes a new idle wait
only when the set changed."""

from __future__ import annotations

from types import SimpleNamespace

from shared.settings.config import from_dict
from worker.queues import serve_queues


class Store:
    def __init__(self):
        self.queues, self.waits = "unset", 0

    def serving_tag(self):
        return repr(self.queues)

    def serve(self, queues):
        self.queues = queues

    def wakeup(self):
        self.waits += 1
        return Wakeup()


class Wakeup:
    closed = False

    def close(self):
        self.closed = True


def worker(slot, config):
    return SimpleNamespace(store=Store(), config=config, slot=slot, pid=1, wakeup=Wakeup())


def test_the_slot_picks_its_pools_queues_and_a_change_gets_a_new_wait():
    cfg = from_dict({"supervisor": {"workers": 3}, "queues": {"emails": {"workers": 1}}})
    w = worker(0, cfg)
    first = w.wakeup
    serve_queues(w)
    assert w.store.queues == (("emails", 1),) and first.closed and w.store.waits == 1
    again = w.wakeup
    serve_queues(w)  # same set: the same wait
    assert w.wakeup is again and not again.closed and w.store.waits == 1
    w.config = from_dict({"supervisor": {"workers": 3}})  # reloaded: one pool for all
    serve_queues(w)
    assert w.store.queues is None and again.closed and w.store.waits == 2


def test_a_worker_without_a_store_or_wait_is_left_alone():
    cfg = from_dict({})
    w = worker(0, cfg)
    w.store = None
    serve_queues(w)  # nothing to point
    assert not w.wakeup.closed
    w = worker(5, from_dict({"supervisor": {"workers": 2}}))
    w.wakeup = None
    serve_queues(w)  # a retiring slot serves nothing; no wait to replace
    assert w.store.queues == () and w.store.waits == 0
