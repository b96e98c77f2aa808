"""Containers, unions and records (shared.model.shapes), built from their parts' codecs."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from decimal import Decimal
from typing import Any, Optional

import pytest

from shared.model.codecbook import codec_of

U = uuid.UUID(int=7)


def test_sequences_and_sets_are_json_lists_and_come_back_as_their_kind():
    for tp, value in [(list[uuid.UUID], [U]), (tuple[Decimal, ...], (Decimal(1),))]:
        c = codec_of(tp)
        assert c.decode(c.encode(value, "a"), "a") == value
    c = codec_of(frozenset[int])
    assert c.decode(c.encode(frozenset({1, 2}), "a"), "a") == frozenset({1, 2})
    with pytest.raises(TypeError, match=r"argument 'x'\[1\] is a str value"):
        codec_of(list[int]).encode([1, "2"], "argument 'x'")
    with pytest.raises(TypeError, match="is a tuple value"):
        codec_of(list[int]).encode((1,), "a")


def test_a_fixed_tuple_keeps_its_length():
    c = codec_of(tuple[int, dt.date])
    assert c.decode(c.encode((1, dt.date(2026, 1, 2)), "a"), "a") == (1, dt.date(2026, 1, 2))
    with pytest.raises(ValueError, match="cannot be read"):
        c.decode([1], "a")


def test_dict_keys_are_text_whatever_their_annotation():
    c = codec_of(dict[int, Decimal])
    assert c.encode({1: Decimal("2.5")}, "a") == {"1": "2.5"}
    assert c.decode({"1": "2.5"}, "a") == {1: Decimal("2.5")}
    c = codec_of(dict[uuid.UUID, int])
    assert c.decode(c.encode({U: 1}, "a"), "a") == {U: 1}
    with pytest.raises(TypeError, match="has the key 1"):
        codec_of(dict).encode({1: 2}, "a")


def test_a_union_encodes_by_the_value_and_decodes_in_order():
    c = codec_of(uuid.UUID | int | None)
    assert c.encode(None, "a") is None and c.encode(3, "a") == 3 and c.encode(U, "a") == str(U)
    assert c.decode(str(U), "a") == U and c.decode(3, "a") == 3
    assert codec_of(int | None).accepts == {int, bool, type(None)}
    with pytest.raises(TypeError, match="does not fit its annotation UUID | int | None"):
        c.encode("x", "a")


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)
    seen: dt.date | None = None


def test_a_record_holds_itself_and_names_a_field_it_does_not_have():
    tree = Node("a", [Node("b", seen=dt.date(2026, 1, 1))])
    c = codec_of(Node)
    data = c.encode(tree, "a")
    assert data == {
        "name": "a",
        "children": [{"name": "b", "children": [], "seen": "2026-01-01"}],
        "seen": None,
    }
    assert c.decode(data, "a") == tree
    with pytest.raises(ValueError, match="Node has no field 'age'"):
        c.decode({"name": "x", "age": 3}, "a")
    with pytest.raises(ValueError, match="cannot be read as Node"):
        c.decode({}, "a")  # name is required


SAMPLES = {int: 3, bool: True, str: "s", float: 2.5, type(None): None, list: [1], dict: {"a": 1}}


@pytest.mark.parametrize("tp", [int | None, str | float | None, int | str, Optional[Any]])
def test_what_a_plain_union_passes_unchanged_its_members_give_unchanged(tp):
    """A plain union's ``accepts``, ``writes`` and ``floats`` (its members', which callers use
    to skip the union's own ``decode``/``encode``) hold only values it gives back as they are."""
    c = codec_of(tp)
    for kind in c.accepts:
        assert c.decode(SAMPLES[kind], "a") is SAMPLES[kind]
    for kind in c.writes | ({float} if c.floats else set()):
        assert c.encode(SAMPLES[kind], "a") is SAMPLES[kind]
    assert c.floats == (float in c.accepts)
