"""A job's enqueue options (``shared.producer.options``): what was given, each option checked
with the message ``JobQueue.enqueue`` gives, and the shapes of an ``enqueue_many`` item."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from shared.producer.options import NAMES, PLAIN, Options, split_item

NOW = 1_700_000_000.0


def test_plain_means_no_option_given_not_a_falsy_one():
    assert PLAIN.plain and Options().plain
    for name in NAMES:
        assert not Options(**{name: 0}).plain, name
    assert not Options(after=[]).plain


def test_of_a_calls_locals_is_plain_itself_when_nothing_was_given():
    nothing = dict.fromkeys(NAMES)
    assert Options.of({**nothing, "type": "t", "payload": 1}) is PLAIN
    for name in NAMES:
        given = Options.of({**nothing, name: 0})
        assert given is not PLAIN and not given.plain and getattr(given, name) == 0, name


def test_checked_gives_the_default_priority_and_now_when_nothing_is_given():
    assert PLAIN.checked("t", 7, NOW) == (7, NOW, None, None, None)
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert Options(priority=-3, run_at=at, max_attempts=2, key="k", after_failure="run").checked(
        "t", 7, NOW
    ) == (-3, at.timestamp(), 2, "k", "run")
    assert Options(delay=10).checked("t", 0, NOW)[1] == NOW + 10


@pytest.mark.parametrize(
    "options, error, message",
    [
        (Options(priority=True), TypeError, "priority must be an integer"),
        (Options(priority=1 << 31), ValueError, "job 't': priority must fit in 32 bits"),
        (Options(max_attempts=0), ValueError, "job 't': max_attempts must be an integer"),
        (Options(key=""), ValueError, "key must be a non-empty string"),
        (Options(run_at=NOW, delay=1), ValueError, "give run_at or delay, not both"),
        (Options(delay=-1), ValueError, "delay must be a number of seconds >= 0"),
        (Options(delay=10**400), ValueError, "years 1 to 9999"),
        (
            Options(run_at=1e12),
            ValueError,
            r"years 1 to 9999 .*\(run_at=1000000000000.0, delay=None",
        ),
        (Options(after_failure="maybe"), ValueError, "after_failure must be one of"),
    ],
)
def test_each_option_is_checked_with_enqueues_message(options, error, message):
    with pytest.raises(error, match=message):
        options.checked("t", 0, NOW)


def test_the_checks_run_in_enqueues_order():
    with pytest.raises(TypeError, match="priority"):
        Options(priority="high", max_attempts=0, key="").checked("t", 0, NOW)
    with pytest.raises(ValueError, match="max_attempts"):
        Options(max_attempts=0, key="", delay=-1).checked("t", 0, NOW)
    with pytest.raises(ValueError, match="key must"):
        Options(key="", delay=-1).checked("t", 0, NOW)


def test_parents_resolve_an_earlier_item_of_the_call_by_index():
    assert Options(after=["a", "a", "b"]).parents() == ("a", "b")
    assert Options(after=[0]).parents(["id0", "id1"], 1) == ("id0",)
    assert PLAIN.parents() == ()


def test_split_item_reads_every_shape_of_an_enqueue_many_item():
    assert split_item(0, ("t", {"a": 1})) == ("t", {"a": 1}, PLAIN)
    assert split_item(0, ("t", None))[2] is PLAIN
    assert split_item(0, ["t"]) == ("t", None, Options())
    assert split_item(0, ("t", 1, {"priority": 2})) == ("t", 1, Options(priority=2))
    assert split_item(0, {"type": "t", "payload": 1, "after": [0]}) == ("t", 1, Options(after=[0]))


def test_split_item_names_the_item_of_another_shape_or_an_unknown_option():
    with pytest.raises(TypeError, match=r"enqueue_many item 3: expected \(type, payload"):
        split_item(3, "t")
    with pytest.raises(TypeError, match=r"enqueue_many item 1: unknown options \['prio'\]"):
        split_item(1, ("t", None, {"prio": 1}))
