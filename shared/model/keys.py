"""Limit keys (docs/types.md): the tenant, customer or API key a job's per-key limits
count by. A job's key is ``limit_key=`` at enqueue, else what ``[types.X] key`` (a dotted path
into the payload) finds there, else none (the job counts toward no key). A task's job names its
parameter instead (:func:`parameter_path`): shared.producer.taskoptions binds the call to find it.
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
    for part in steps(path):
        if not isinstance(value, dict) or part not in value:
            raise ValueError(
                f'job {jtype!r}: [types."{jtype}"] key = {path!r}, but its payload has no {path}'
            )
        value = value[part]
    return key_text(jtype, path, value)


def steps(path: str) -> list[str]:
    """The names a key path walks from the payload: ``"payload.a.b"`` and ``"a.b"`` alike."""
    parts = path.split(".")
    return parts[1:] if parts[0] == "payload" and len(parts) > 1 else parts


def key_text(jtype: str, where: str, value: Any) -> str:
    """``value`` (found at ``where``) as a limit key: a string as it is, a number as its JSON
    text; ValueError naming the job type, ``where`` and the value for anything else."""
    if isinstance(value, str) and value and len(value) <= MAX_KEY_LEN:
        why = unstorable(value)
        if why is not None:
            raise ValueError(
                f"job {jtype!r}: {where} = {value!r:.80} cannot be a limit key: it has {why}"
            )
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return json.dumps(value)
    raise ValueError(
        f"job {jtype!r}: {where} = {value!r:.80} cannot be a limit key: expected a non-empty "
        f"string of at most {MAX_KEY_LEN} characters or a number"
    )


def parameter_path(path: str) -> list[str] | None:
    """A task's key path as the parameter it names and the names walked into its value:
    ``"customer_id"``, ``"order.customer"`` and the payload's own spelling
    ``"payload.kwargs.customer_id"`` alike; None for a path into the payload that names no
    parameter (``"payload.args"``)."""
    parts = path.split(".")
    if parts[0] != "payload":
        return parts
    if len(parts) > 2 and parts[1] == "kwargs":
        return parts[2:]
    return None


def task_key_error(jtype: str, path: str, params: tuple[str, ...]) -> str | None:
    """Why ``[types."<jtype>"] key = path`` cannot work for a task with ``params``, or None."""
    named = parameter_path(path)
    if named is not None and named[0] in params:
        return None
    return (
        f'[types."{jtype}"] key = {path!r} names no parameter of task {jtype!r} (its '
        f"parameters: {', '.join(params) or 'none'}): write a parameter's name, as in "
        f'key = "{params[0] if params else "customer_id"}"; it is found whether a caller passes '
        f"it by position or by keyword"
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
