"""shared.model.queuenames: what a queue may be called, and ``[types.X] key`` paths."""

from __future__ import annotations

import pytest

from shared.model.queuenames import (
    KEY_PATH,
    MAX_QUEUE_LEN,
    QUEUE_LIST,
    QUEUE_NAME,
    check_queue,
    key_path_error,
    queue_name_error,
)


@pytest.mark.parametrize("name", ["default", "emails-eu", "q" * MAX_QUEUE_LEN, "ünïcode"])
def test_valid_names(name):
    assert queue_name_error(name) is None
    assert check_queue(name) == name


@pytest.mark.parametrize(
    "name, words",
    [
        ("", "non-empty"),
        (None, "non-empty"),
        (3, "non-empty"),
        ("q" * (MAX_QUEUE_LEN + 1), f"above {MAX_QUEUE_LEN}"),
        ("a,b", "comma"),
        ("a\tb", "control"),
        ("a\x7f", "control"),
        (" a", "blanks"),
        ("a ", "blanks"),
        ("a\udc80", "lone surrogate"),
    ],
)
def test_invalid_names_say_why(name, words):
    why = queue_name_error(name)
    assert why is not None and words in why
    with pytest.raises(ValueError, match=words):
        check_queue(name)


def test_config_keys_check_names_and_lists():
    assert QUEUE_NAME.check("emails") and not QUEUE_NAME.check("a,b")
    assert QUEUE_LIST.check(["a", "b"]) and not QUEUE_LIST.check(["a", ""])
    assert QUEUE_LIST.check([])


@pytest.mark.parametrize(
    "path, ok",
    [
        ("payload.customer", True),
        ("payload.a.b", True),
        ("payload", False),
        ("payload.", False),
        ("payload..a", False),
        ("body.a", True),  # from the payload's top: a field, or a task's parameter and in it
        ("customer_id", True),
        ("payload.args.0", False),  # a list by index: moves with how a caller passes it
        ("order.7", False),
        ("", False),
        (7, False),
    ],
)
def test_key_paths(path, ok):
    assert (key_path_error(path) is None) is ok
    assert KEY_PATH.check(path) is ok


def test_a_key_path_into_a_list_is_refused_saying_why_and_what_to_write():
    why = key_path_error("payload.args.0")
    assert "by index (0)" in why and "JSON objects by name" in why and "customer_id" in why
