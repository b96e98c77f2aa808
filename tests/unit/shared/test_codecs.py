"""The leaf codecs (shared.model.codecs): JSON's scalars checked both ways, a passthrough that
checks plain JSON as before annotations counted, a leaf type's encode and decode errors."""

from __future__ import annotations

import math
import uuid

import pytest

from shared.model.codecs import Choice, Leaf, Passthrough, Scalar, check_plain


def test_check_plain_refuses_what_json_would_change_naming_the_path():
    check_plain({"a": [1, 2.5, None, True, "x"]}, "argument 'p'")
    with pytest.raises(TypeError, match=r"argument 'p'\['a'\]\[1\] is a tuple value"):
        check_plain({"a": [1, (2,)]}, "argument 'p'")
    with pytest.raises(TypeError, match="has the key 1"):
        check_plain({1: 2}, "argument 'p'")
    with pytest.raises(ValueError, match="nan, which JSON cannot hold"):
        check_plain([math.nan], "argument 'p'")


def test_scalars_check_their_type_and_a_float_takes_an_int():
    assert Scalar(int).encode(True, "a") is True and Scalar(int).accepts == {int, bool}
    with pytest.raises(TypeError, match="argument 'n' is a str value.*annotation int"):
        Scalar(int).encode("1", "argument 'n'")
    assert Scalar(float).decode(2, "a") == 2.0 and type(Scalar(float).decode(2, "a")) is float
    with pytest.raises(ValueError, match="inf"):
        Scalar(float).encode(math.inf, "a")
    with pytest.raises(ValueError, match="cannot be read as bool from 1"):
        Scalar(bool).decode(1, "a")


def test_a_passthrough_takes_any_json_and_says_why_it_did_not_convert():
    p = Passthrough("Thing", "its annotation 'Thing' could not be resolved")
    assert p.encode([1, {"a": None}], "a") == [1, {"a": None}] and p.decode(b"x", "a") == b"x"
    with pytest.raises(TypeError, match="could not be resolved"):
        p.encode({1, 2}, "argument 'x'")


def test_a_leaf_names_the_value_that_does_not_fit_and_the_text_it_cannot_read():
    leaf = Leaf(uuid.UUID, str, uuid.UUID)
    u = uuid.uuid4()
    assert leaf.decode(leaf.encode(u, "a"), "a") == u
    with pytest.raises(TypeError, match="argument 'id' is a str value.*annotation UUID"):
        leaf.encode(str(u), "argument 'id'")
    with pytest.raises(ValueError, match="argument 'id' cannot be read as UUID from 'nope'"):
        leaf.decode("nope", "argument 'id'")
    own = Leaf(complex, lambda c: [c.real, c.imag], lambda d: complex(*d), trusted=False)
    assert own.encode(1 + 2j, "a") == [1.0, 2.0]
    bad = Leaf(complex, lambda c: c, complex, trusted=False)  # an encoder giving no JSON
    with pytest.raises(TypeError, match="complex value"):
        bad.encode(1j, "a")


def test_a_literal_takes_only_its_values():
    c = Choice(("a", "b"))
    assert c.encode("a", "x") == "a" and c.decode("b", "x") == "b"
    with pytest.raises(ValueError, match="not one of Literal"):
        c.encode("c", "x")


SAMPLES = {int: 3, bool: True, str: "s", float: 2.5, type(None): None, list: [1], dict: {"a": 1}}


@pytest.mark.parametrize(
    "codec",
    [Scalar(int), Scalar(str), Scalar(float), Scalar(bool), Scalar(type(None))]
    + [Passthrough(), Passthrough("T", "why")],
)
def test_what_a_codec_passes_unchanged_is_what_encode_and_decode_give_unchanged(codec):
    """Callers skip ``decode`` for a value whose type is in ``accepts``, ``encode`` for one in
    ``writes`` (and for a finite float where ``floats``): the codec would give it back as is."""
    for kind in codec.accepts:
        value = SAMPLES[kind]
        assert codec.decode(value, "a") is value
    for kind in codec.writes | ({float} if codec.floats else set()):
        value = SAMPLES[kind]
        assert codec.encode(value, "a") is value
    assert codec.floats == (float in codec.accepts)
