"""shared.producer.canvas: the items a flow writes in its one ``enqueue_many``, and which
steps wait for which (end to end on both engines: tests/behaviour/test_flows.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shared.producer.canvas import Signature, chain, chord, group


class Queue:
    """Records the one enqueue_many call and names the jobs by index."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self.conn = None

    def enqueue_many(self, items, conn=None):
        self.items, self.conn = items, conn
        return [f"j{i}" for i in range(len(items))]


def task(name, priority=None, **options):
    binder = SimpleNamespace(payload=lambda args, kwargs: {"args": list(args), **kwargs})
    return SimpleNamespace(name=name, binder=binder, options=options, priority=priority)


def sig(name, *args, **opts):
    return Signature(task(name, **opts), args, {})


def afters(q: Queue):
    return [(i["type"], i["after"]) for i in q.items]


def test_chain_waits_step_by_step_and_returns_the_last_handle():
    q = Queue()
    run = chain(sig("a", 1), sig("b"), sig("c")).enqueue(q, conn="tx")
    assert afters(q) == [("a", []), ("b", [0]), ("c", [1])]
    assert q.items[0]["payload"] == {"args": [1]} and q.conn == "tx"
    assert [h.id for h in run.handles] == ["j0", "j1", "j2"] and [h.id for h in run.last] == ["j2"]


def test_chord_fans_in_and_a_step_after_a_group_waits_for_all():
    q = Queue()
    run = chain(sig("start"), chord([sig("p"), sig("p")], sig("sum")), sig("end")).enqueue(q)
    assert afters(q) == [("start", []), ("p", [0]), ("p", [0]), ("sum", [1, 2]), ("end", [3])]
    assert [h.id for h in run.last] == ["j4"]


def test_a_groups_last_jobs_are_all_its_steps():
    q = Queue()
    run = group(sig(f"t{i}") for i in range(3)).enqueue(q)
    assert afters(q) == [("t0", []), ("t1", []), ("t2", [])]
    assert [h.id for h in run.last] == ["j0", "j1", "j2"]


def test_the_first_tasks_queue_is_the_flows_and_options_carry_over():
    q, other = Queue(), Queue()
    a = Signature(task("a", priority=5, queue=q, after=["ext"], conn="ignored"), (), {})
    chain(a, Signature(task("b", queue=other), (), {})).enqueue()
    assert other.items == [] and [i["type"] for i in q.items] == ["a", "b"]
    assert q.items[0]["priority"] == 5 and q.items[0]["after"] == ["ext"]
    assert all("_queue" not in i and "conn" not in i for i in q.items)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: chain(), "chain: needs at least one step"),
        (lambda: group([]), "group: needs at least one step"),
        (lambda: chain(sig("a"), "b"), "chain: expected signatures .* got 'b'"),
        (lambda: group(sig("a"), 3), "group: expected signatures .* got 3"),
    ],
)
def test_bad_steps_are_refused_before_anything_is_written(make, words):
    with pytest.raises((TypeError, ValueError), match=words):
        make()


def test_signature_repr_names_the_call():
    assert repr(Signature(task("send"), (1,), {"to": "x"})) == "send.s(*(1,), **{'to': 'x'})"
