"""shared.model.bounds: the limits on what jobq accepts (nesting, Unicode, type names, times)."""

from __future__ import annotations

import json

import pytest

from shared.model import bounds


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_too_deep_counts_levels_not_brackets():
    assert not bounds.too_deep(nested(bounds.MAX_DEPTH))
    assert bounds.too_deep(nested(bounds.MAX_DEPTH + 1))
    wide = json.dumps([[1]] * 500)  # 1,000 brackets, two levels
    assert not bounds.too_deep(wide)


def test_too_deep_ignores_brackets_inside_strings():
    text = json.dumps(["[" * 300, {"k": "{" * 300}])
    assert not bounds.too_deep(text)
    assert bounds.too_deep(json.dumps({"a": [{"b": [1]}]}), limit=3)
    assert not bounds.too_deep(json.dumps({"a": [{"b": [1]}]}), limit=4)


def test_safe_text_escapes_only_lone_surrogates():
    assert bounds.safe_text("café") == "café"
    lone = "name\udc80.txt"
    assert not bounds.is_unicode(lone)
    assert bounds.safe_text(lone) == "name\\udc80.txt"


@pytest.mark.parametrize(
    "jtype, words",
    [
        ("", "non-empty"),
        ("   ", "non-empty"),
        (7, "non-empty"),
        ("x" * (bounds.MAX_TYPE_LEN + 1), "above the limit"),
        ("a\x00b", "control character"),
        ("a\x85b", "control character"),
        ("a\udc80", "not valid Unicode"),
    ],
)
def test_type_name_error_says_why(jtype, words):
    why = bounds.type_name_error(jtype)
    assert why is not None and words in why


def test_type_name_at_the_limit_is_accepted():
    assert bounds.type_name_error("x" * bounds.MAX_TYPE_LEN) is None
    assert bounds.type_name_error("emails.send/v2") is None


@pytest.mark.parametrize("ts", [bounds.MIN_TIME, 0, 1.5, bounds.MAX_TIME])
def test_time_error_accepts_years_1_to_9999(ts):
    assert bounds.time_error(ts) is None


@pytest.mark.parametrize(
    "ts", [bounds.MAX_TIME + 1, bounds.MIN_TIME - 1, float("nan"), float("inf"), True, "0", None]
)
def test_time_error_names_the_value(ts):
    why = bounds.time_error(ts)
    assert why is not None and repr(ts) in why
