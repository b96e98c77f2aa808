"""Limit keys (docs/types.md): the tenant, customer or API key a job's per-key limits
count by. A job's key is ``limit_key=`` at enqueue, else what ``[types.X] key`` (a dotted path
into the payload) finds there, else none (the job counts toward no key).
"""

from __future__ import annotations

import json
from typing import Any

from shared.model.bounds import is_unicode

MAX_KEY_LEN = 200


def limit_key_of(jtype: str, payload: Any, given: Any, path: str | None) -> str | None:
    """The limit key of a job of ``jtype``: ``given`` (checked), else the value at ``path`` in
    ``payload`` (a string, or a number as its JSON text). ValueError, naming the job type and
    the path or value, when the path is missing or holds something else, or a text no engine
    stores (:func:`unstorable`); nothing is written."""
    if given is not None:
        if not isinstance(given, str) or not given or len(given) > MAX_KEY_LEN:
            raise ValueError(
                f"job {jtype!r}: limit_key must be a non-empty string of at most {MAX_KEY_LEN} "
                f"characters, got {given!r:.80}"
            )
        why = unstorable(given)
        if why is not None:
            raise ValueError(f"job {jtype!r}: limit_key {given!r:.80} has {why}")
        return given
    if path is None:
        return None
    value = payload
    for part in path.split(".")[1:]:
        if not isinstance(value, dict) or part not in value:
            raise ValueError(
                f'job {jtype!r}: [types."{jtype}"] key = {path!r}, but its payload has no {path}'
            )
        value = value[part]
    if isinstance(value, str) and value and len(value) <= MAX_KEY_LEN:
        why = unstorable(value)
        if why is not None:
            raise ValueError(
                f"job {jtype!r}: {path} = {value!r:.80} cannot be a limit key: it has {why}"
            )
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    raise ValueError(
        f"job {jtype!r}: {path} = {value!r:.80} cannot be a limit key: expected a non-empty "
        f"string of at most {MAX_KEY_LEN} characters or a number"
    )


def unstorable(text: str) -> str | None:
    """Why ``text`` (a limit key or a queue name) cannot be stored alike on every engine, or
    None: a NUL character (PostgreSQL's text cannot hold it; SQLite's C strings end at it) or
    a lone surrogate (not Unicode a database can encode)."""
    if "\x00" in text:
        return "a NUL character, which jobq cannot store"
    if not is_unicode(text):
        return "a lone surrogate (not valid Unicode), which jobq cannot store"
    return None
