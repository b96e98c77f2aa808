"""A task's arguments as a job payload, and back: ``{"args": [...], "kwargs": {...}}``.

The producer binds the arguments to the function's signature and checks that each survives
JSON unchanged, so what the worker passes the function equals what the caller gave; the worker
binds the stored payload again (it may come from the CLI, SQL or another language).
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Sequence

_SCALARS = (str, int, float, bool, type(None))
_PLAIN = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_LAST = 1 << 30  # the position of a keyword-only parameter: after every positional argument


class Binder:
    """A task's signature read once, to bind a call without ``inspect.Signature.bind`` (about
    10 µs a call) when it plainly fits: no ``*args``, ``**kwargs`` or positional-only
    parameter, no more positional arguments than parameters, each keyword a parameter not
    given by position, every parameter without a default given. Anything else goes the way
    of :func:`payload_of` (and :func:`unpack`), so a call that does not bind raises there, with
    the same error as ever."""

    def __init__(self, name: str, signature: inspect.Signature) -> None:
        self.name, self.signature = name, signature
        params = list(signature.parameters.values())
        self.plain = all(p.kind in _PLAIN for p in params)
        self.order = tuple(p.name for p in params)  # the signature's order: bind's, and its checks'
        positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        self.index = {n: (positional.index(n) if n in positional else _LAST) for n in self.order}
        self.npos = len(positional)
        self.required = tuple(
            (self.index[p.name], p.name) for p in params if p.default is inspect.Parameter.empty
        )
        self.labels = {n: f"argument {n!r}" for n in self.order}

    def fits(self, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
        """Whether the call surely binds (False: let ``Signature.bind`` decide and explain)."""
        n, index = len(args), self.index
        if not self.plain or n > self.npos:
            return False
        for key in kwargs:
            if index.get(key, -1) < n:  # not a parameter, or given by position too
                return False
        return all(i < n or pname in kwargs for i, pname in self.required)

    def payload(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """As :func:`payload_of` for this task (the same payload, the same errors)."""
        if not self.fits(args, kwargs):
            return payload_of(self.name, self.signature, args, kwargs)
        n = len(args)
        for i, pname in enumerate(self.order):
            if i < n:
                value = args[i]
            elif pname in kwargs:
                value = kwargs[pname]
            else:
                continue
            kind = type(value)
            if kind is not str and kind is not int and kind is not bool and value is not None:
                check_json(value, self.name, self.labels[pname])
        return {"args": list(args), "kwargs": dict(kwargs)}


def payload_of(
    name: str, signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The payload of a call of task ``name``; TypeError for arguments that do not bind, or a
    value JSON would change; ValueError for a float JSON cannot hold. Both name the task and
    the argument."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"task {name!r}: {exc}") from None
    for param, value in bound.arguments.items():
        kind = signature.parameters[param].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            for i, item in enumerate(value):
                check_json(item, name, f"argument *{param}[{i}]")
        elif kind is inspect.Parameter.VAR_KEYWORD:
            for key, item in value.items():
                check_json(item, name, f"argument {key!r}")
        else:
            check_json(value, name, f"argument {param!r}")
    return {"args": list(args), "kwargs": dict(kwargs)}


def check_json(value: Any, name: str, label: str, path: str = "") -> None:
    """Raise unless ``value`` is built only of what JSON gives back as it was: dict (str keys),
    list, str, int, finite float, bool, None."""
    kind = type(value)
    if kind in _SCALARS:
        if kind is float and not math.isfinite(value):
            raise ValueError(f"task {name!r}: {label}{path} is {value!r}, which JSON cannot hold")
        return
    if kind is list:
        for i, item in enumerate(value):
            check_json(item, name, label, f"{path}[{i}]")
        return
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(
                    f"task {name!r}: {label}{path} has the key {key!r}; JSON keys are "
                    f"strings (it would come back as {str(key)!r})"
                )
            check_json(item, name, label, f"{path}[{key!r}]")
        return
    hint = _HINTS.get(kind.__name__, "pass str, int, float, bool, None, list or dict")
    raise TypeError(
        f"task {name!r}: {label}{path} is a {kind.__name__} value, which JSON does not "
        f"give back unchanged: {hint}"
    )


_HINTS = {
    "tuple": "it would come back as a list: pass a list",
    "set": "pass a list",
    "frozenset": "pass a list",
    "bytes": "pass text (base64, say)",
    "datetime": "pass ISO text with a zone (.isoformat())",
    "date": "pass ISO text (.isoformat())",
    "Decimal": "pass text or a float",
}


def unpack(
    name: str, signature: inspect.Signature, payload: Any, binder: Binder | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """The ``(args, kwargs)`` of a stored payload, bound to the signature: TypeError/ValueError
    naming the task when the payload is not ``{"args": list, "kwargs": object}`` (either may be
    left out) or does not fit the function (``binder``: the signature's, to skip ``bind`` when
    the payload plainly fits)."""
    if payload is None:
        payload = {}
    if not isinstance(payload, dict) or set(payload) - {"args", "kwargs"}:
        raise ValueError(
            f'task {name!r}: the payload must be an object with "args" (a list) and '
            f'"kwargs" (an object), got {_short(payload)}'
        )
    args, kwargs = payload.get("args", []), payload.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise ValueError(
            f'task {name!r}: the payload\'s "args" must be a list and "kwargs" an '
            f"object, got {_short(payload)}"
        )
    if binder is not None and binder.fits(args, kwargs):
        return args, kwargs
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(
            f"task {name!r}: payload {_short(payload)} does not fit {name}{signature}: {exc}"
        ) from None
    return args, kwargs


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
