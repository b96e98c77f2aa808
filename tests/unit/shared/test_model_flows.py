"""shared.model.flows: ``after=`` as parent ids, and the ``after_failure`` policy."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shared.model.flows import FlowError, parent_ids, policy


def test_none_and_single_values():
    assert parent_ids(None) == ()
    assert parent_ids("j1") == ("j1",)
    assert parent_ids(SimpleNamespace(id="j2")) == ("j2",)


def test_ids_and_handles_in_order_each_once():
    h = SimpleNamespace(id="b")
    assert parent_ids(["a", h, "a", "c", h]) == ("a", "b", "c")
    assert parent_ids(x for x in ("z", "y")) == ("z", "y")


def test_indexes_name_earlier_items_of_the_same_call():
    assert parent_ids([0, 1], ids=["i0", "i1", "i2"], index=2) == ("i0", "i1")


@pytest.mark.parametrize("after", [2, 3, -1])
def test_an_index_that_is_not_earlier_is_a_cycle(after):
    with pytest.raises(FlowError, match=rf"after={after}: .*\(0 to 1\)"):
        parent_ids([after], ids=["i0", "i1", "i2", "i3"], index=2)


@pytest.mark.parametrize("after", [[5], [""], [True], [None], [b"id"], [SimpleNamespace(id=3)]])
def test_what_is_not_an_id_is_named(after):
    with pytest.raises(TypeError, match="expected job ids or handles"):
        parent_ids(after)


def test_an_int_outside_enqueue_many_is_not_an_index():
    with pytest.raises(TypeError, match="got 0"):
        parent_ids([0])


def test_policy():
    assert [policy(p) for p in (None, "cancel", "run", "hold")] == [None, "cancel", "run", "hold"]
    with pytest.raises(ValueError, match="got 'skip'"):
        policy("skip")
    assert issubclass(FlowError, ValueError)
