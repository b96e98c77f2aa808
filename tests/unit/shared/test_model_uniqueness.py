"""shared.model.uniqueness: the scopes ``unique=`` names, and the key made without ``key=``."""

from __future__ import annotations

import pytest

from shared.model.uniqueness import ACTIVE, KEPT, NOT_STARTED, Unique, derived_key, unique_scope


@pytest.mark.parametrize(
    "given, statuses, period",
    [
        ("pending", NOT_STARTED, None),
        ("Active ", ACTIVE, None),
        ("kept", None, None),
        (60, None, 60.0),
        (0.5, None, 0.5),
        ("10m", None, 600.0),
        ("1h30m", None, 5400.0),
    ],
)
def test_scopes_by_name_and_period(given, statuses, period):
    scope = unique_scope(given)
    assert (scope.statuses, scope.period) == (statuses, period)
    assert scope.frees == (statuses is not None or period is not None)


def test_not_given_and_a_checked_scope_pass_through():
    assert unique_scope(None) is None
    assert unique_scope(KEPT) is KEPT
    assert not KEPT.frees and Unique("x", ("pending",)).frees


@pytest.mark.parametrize("bad", ["sometimes", "", 0, -1, float("inf"), True, [60], "-5s"])
def test_anything_else_is_refused_naming_the_owner_and_the_value(bad):
    with pytest.raises(ValueError, match=r"job 't': unique= must be \"pending\", \"active\"") as e:
        unique_scope(bad, "job 't'")
    assert repr(bad)[:10] in str(e.value)


def test_derived_key_ignores_object_key_order_and_names_the_type():
    a = derived_key("t", '{"x": 1, "y": [1, {"b": 2, "a": 1}]}')
    assert a == derived_key("t", '{"y": [1, {"a": 1, "b": 2}], "x": 1}')
    assert a.startswith("unique:t:") and len(a) == len("unique:t:") + 32
    assert a != derived_key("u", '{"x": 1, "y": [1, {"b": 2, "a": 1}]}')
    assert a != derived_key("t", '{"x": 2, "y": [1, {"b": 2, "a": 1}]}')
