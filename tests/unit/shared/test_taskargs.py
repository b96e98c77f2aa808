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


def annotated(a: int, b: str, c: float, d: object = None): ...


VALUES = [
    (7, "x", 2.5),
    (True, "x", 3),
    (7, "x", 2.5, [1, {"k": None}]),
    (7, "x", math.nan),
    (7, "x", -math.inf),
    ("7", "x", 2.5),
    (7, 8, 2.5),
    (7, "x", None),
    (7, "x", 2.5, (1, 2)),
    (7, "x", 2.5, [math.inf]),
]


@pytest.mark.parametrize("args", VALUES)
def test_an_annotated_call_gives_the_payload_and_errors_of_its_codecs_one_by_one(args):
    """The quick check of a call by position (every argument's type is one its codec passes
    as it is) gives what encoding and decoding each argument by its codec gives."""
    sig = inspect.signature(annotated)
    binder = Binder("t", sig, annotated)
    assert outcome(binder.payload, args, {}) == outcome(
        payload_of, "t", sig, args, {}, binder.codecs
    )
    stored = list(args)
    quick = outcome(binder.decode, stored, {}, True)
    assert quick == outcome(binder.codecs.decode_call, stored, {})
    if quick[0] == "ok":
        assert [type(v) for v in quick[1][0]][:3] == [type(args[0]), str, float]


def test_a_bad_argument_on_the_quick_path_is_refused_naming_the_task_and_parameter():
    binder = Binder("t", inspect.signature(annotated), annotated)
    with pytest.raises(ValueError, match=r"task 't': argument 'c' is nan"):
        binder.payload((7, "x", math.nan), {})
    with pytest.raises(TypeError, match=r"task 't': argument 'a' is a str value.*annotation int"):
        binder.payload(("7", "x", 2.5), {})
    with pytest.raises(ValueError, match=r"task 't': argument 'a' cannot be read as int"):
        binder.decode(["7", "x", 2.5], {}, True)
    assert binder.decode([7, "x", 2], {}, True) == ([7, "x", 2.0], {})
