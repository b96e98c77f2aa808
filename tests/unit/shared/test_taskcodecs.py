"""A task's arguments and result through its annotations (shared.model.taskcodecs): every way
of passing an argument finds its parameter's codec, errors name the task, and an annotation
that cannot be resolved passes JSON through saying why."""

from __future__ import annotations

import datetime as dt
import inspect
import uuid

import pytest

from shared.model.taskcodecs import TaskCodecs

U = uuid.UUID(int=9)


def every_way(
    a: uuid.UUID, /, b: dt.date, *rest: uuid.UUID, c: int = 0, **more: dt.date
) -> None: ...


def unresolved(x: "Missing") -> "Missing": ...  # noqa: F821


def test_positional_star_and_keyword_arguments_each_meet_their_codec():
    codecs = TaskCodecs("t", inspect.signature(every_way), every_way)
    args = (U, dt.date(2026, 1, 1), U)
    kwargs = {"c": 1, "a": dt.date(2026, 1, 2)}  # 'a' is positional-only: it goes to **more
    out_args, out_kwargs = codecs.encode_call(args, kwargs)
    assert out_args == [str(U), "2026-01-01", str(U)]
    assert out_kwargs == {"c": 1, "a": "2026-01-02"}
    assert codecs.decode_call(out_args, out_kwargs) == (list(args), kwargs)
    with pytest.raises(TypeError, match=r"task 't': argument \*rest\[0\] is a str value"):
        codecs.encode_call((U, dt.date(2026, 1, 1), "x"), {})


def test_an_unresolved_annotation_passes_json_through_and_says_why():
    codecs = TaskCodecs("t", inspect.signature(unresolved), unresolved)
    assert codecs.encode_call(([1],), {}) == ([[1]], {})
    with pytest.raises(TypeError, match="'Missing.*could not be resolved"):
        codecs.encode_call(({1},), {})
    assert codecs.encode_result((1, 2)) == (1, 2)  # a plain result: left to the JSON encoder


def test_a_result_is_encoded_and_decoded_by_the_return_annotation():
    def f() -> dict[str, uuid.UUID]: ...

    codecs = TaskCodecs("t", inspect.signature(f), f)
    assert codecs.encode_result({"k": U}) == {"k": str(U)}
    assert codecs.decode_result({"k": str(U)}) == {"k": U}
    with pytest.raises(ValueError, match="task 't': the result\\['k'\\] cannot be read as UUID"):
        codecs.decode_result({"k": "x"})
