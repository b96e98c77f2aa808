"""A task's arguments bound without ``inspect.Signature.bind``
(``shared.producer.taskargs.Binder``): for every call, plain or not, the same payload or the same
error as the full binding gives."""

from __future__ import annotations

import inspect
import math

import pytest

from shared.producer.taskargs import Binder, payload_of, unpack


def plain(a, b=2, *, c=None, d): ...
def positional_only(a, /, b=1): ...
def star(a, *rest, **named): ...
def none(): ...


CALLS = [
    ((1,), {"d": 4}),
    ((1, 2), {"c": 3, "d": 4}),
    ((), {"a": 1, "d": 4}),
    ((1,), {}),
    ((1, 2, 3), {"d": 4}),
    ((1,), {"a": 1, "d": 4}),
    ((1,), {"d": 4, "e": 5}),
    ((), {}),
    ((1,), {"b": (1, 2), "d": 4}),
    ((1.5,), {"d": math.nan}),
    (({1: 2},), {"d": 4}),
    (([1, {"x": b"y"}],), {"d": 4}),
    ((True, None), {"c": "x", "d": [1.0, {"k": "v"}]}),
    ((1,), {"d": {1, 2}, "c": object()}),
    (("a", 2, 3), {"b": 1}),
]


def outcome(fn, *args):
    try:
        return "ok", fn(*args)
    except (TypeError, ValueError) as exc:
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("fn", [plain, positional_only, star, none])
@pytest.mark.parametrize("args, kwargs", CALLS)
def test_the_binder_gives_the_payload_and_errors_of_the_full_binding(fn, args, kwargs):
    sig = inspect.signature(fn)
    binder = Binder("t", sig)
    assert outcome(binder.payload, args, kwargs) == outcome(payload_of, "t", sig, args, kwargs)
    stored = {"args": list(args), "kwargs": dict(kwargs)}
    assert outcome(unpack, "t", sig, stored, binder) == outcome(unpack, "t", sig, stored)


def test_a_plain_call_skips_the_full_binding(monkeypatch):
    sig = inspect.signature(plain)
    binder = Binder("t", sig)
    monkeypatch.setattr(
        inspect.Signature, "bind", lambda *a, **k: pytest.fail("bound the slow way")
    )
    assert binder.payload((1,), {"b": 2, "d": [1, "x"]}) == {
        "args": [1],
        "kwargs": {"b": 2, "d": [1, "x"]},
    }
    assert unpack("t", sig, {"args": [1], "kwargs": {"d": 4}}, binder) == ([1], {"d": 4})
