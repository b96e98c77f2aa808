"""shared.model.keys: a job's limit key, given or found in its payload."""

from __future__ import annotations

import pytest

from shared.model.keys import MAX_KEY_LEN, limit_key_of, unstorable


def test_given_key_wins_over_the_path():
    assert limit_key_of("t", {"c": "x"}, "given", "payload.c") == "given"


def test_no_key_and_no_path_is_none():
    assert limit_key_of("t", {"c": "x"}, None, None) is None


def test_path_reads_nested_strings_and_numbers_as_json():
    payload = {"a": {"b": "acme"}, "n": 7, "f": 1.5}
    assert limit_key_of("t", payload, None, "payload.a.b") == "acme"
    assert limit_key_of("t", payload, None, "payload.n") == "7"
    assert limit_key_of("t", payload, None, "payload.f") == "1.5"


@pytest.mark.parametrize(
    "payload, path",
    [
        ({}, "payload.c"),
        ({"a": "text"}, "payload.a.b"),
        ([1], "payload.c"),
    ],
)
def test_missing_path_names_the_type_and_path(payload, path):
    with pytest.raises(ValueError, match=r"'send'.*payload has no " + path.replace(".", r"\.")):
        limit_key_of("send", payload, None, path)


@pytest.mark.parametrize("value", [True, None, "", "x" * (MAX_KEY_LEN + 1), ["a"], {"k": 1}])
def test_path_value_that_cannot_be_a_key_is_refused(value):
    with pytest.raises(ValueError, match=r"'send': payload\.c = .* cannot be a limit key"):
        limit_key_of("send", {"c": value}, None, "payload.c")


@pytest.mark.parametrize("given", ["", 5, "x" * (MAX_KEY_LEN + 1)])
def test_bad_given_key_is_refused(given):
    with pytest.raises(ValueError, match=r"job 'send': limit_key must be a non-empty string"):
        limit_key_of("send", {}, given, None)


def test_key_at_the_length_limit_is_accepted():
    assert limit_key_of("t", {}, "k" * MAX_KEY_LEN, None) == "k" * MAX_KEY_LEN


@pytest.mark.parametrize("text, words", [("a\x00b", "NUL"), ("a\udc80", "lone surrogate")])
def test_unstorable_text_is_refused_given_or_found(text, words):
    assert words in unstorable(text)
    with pytest.raises(ValueError, match=words):
        limit_key_of("t", {}, text, None)
    with pytest.raises(ValueError, match=words):
        limit_key_of("t", {"c": text}, None, "payload.c")
    assert unstorable("plain") is None
