"""shared.model.limits: which types are limited, and which candidates a limited claim takes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from shared.model.limits import TypeLimit, pick_claims, type_limits


def typ(concurrency=None, rate=None, concurrency_per_key=None, rate_per_key=None, fair=False):
    return SimpleNamespace(
        concurrency=concurrency,
        rate=rate,
        fair=fair,
        concurrency_per_key=concurrency_per_key,
        rate_per_key=rate_per_key,
    )


def test_type_limits_keeps_only_limited_types():
    config = SimpleNamespace(
        types={
            "free": typ(),
            "c": typ(concurrency=2),
            "r": typ(rate="10/min"),
            "k": typ(rate_per_key="3/10s"),
            "f": typ(fair=True),
        }
    )
    got = type_limits(config)
    assert sorted(got) == ["c", "f", "k", "r"]
    assert got["r"].rate == (10, 60.0) and not got["r"].keyed
    assert got["k"].rate_per_key == (3, 10.0) and got["k"].keyed
    assert got["f"].keyed and got["c"].concurrency == 2


def test_type_limits_refuses_a_bad_rate():
    with pytest.raises(ValueError, match="'often'"):
        type_limits(SimpleNamespace(types={"t": typ(rate="often")}))


def test_keyed_is_false_for_plain_limits():
    assert not TypeLimit("t", concurrency=1, rate=(1, 1.0)).keyed
    assert TypeLimit("t", concurrency_per_key=1).keyed


def test_pick_respects_the_limit_and_each_types_room():
    cands = [("1", "a"), ("2", "a"), ("3", "b"), ("4", "a"), ("5", "c")]
    room = {"a": 2}
    assert pick_claims(cands, room, set(), 10) == ["1", "2", "3", "5"]
    assert room == {"a": 0}
    assert pick_claims(cands, {"a": 5}, set(), 2) == ["1", "2"]


def test_a_rated_type_comes_only_first_and_ends_the_batch():
    cands = [("1", "x"), ("2", "r"), ("3", "x")]
    assert pick_claims(cands, {}, {"r"}, 10) == ["1", "3"]
    assert pick_claims([("2", "r"), ("3", "x")], {}, {"r"}, 10) == ["2"]


def test_no_room_left_takes_nothing():
    assert pick_claims([("1", "a")], {"a": 0}, set(), 5) == []
    assert pick_claims([("1", "a")], {}, set(), 0) == []


def test_key_room_limits_each_key_and_keyless_jobs_pass():
    cands = [("1", "t", "k1"), ("2", "t", "k1"), ("3", "t", "k2"), ("4", "t", None)]
    key_room = {("t", "k1"): 1}
    assert pick_claims(cands, {}, set(), 10, key_room) == ["1", "3", "4"]
    assert key_room == {("t", "k1"): 0}
