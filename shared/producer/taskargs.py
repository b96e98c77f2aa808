"""A task's arguments as a job payload, and back: ``{"args": [...], "kwargs": {...}}``.

The producer binds the arguments to the function's signature and encodes each by its
annotation (:mod:`shared.model.taskcodecs`: a ``UUID`` as its text, a dataclass as an object; an
unannotated or plain one is checked to survive JSON unchanged), so what the worker passes the
function equals what the caller gave; the worker binds the stored payload again (it may come
from the CLI, SQL or another language) and decodes it by the same annotations.
"""

from __future__ import annotations

import inspect
from typing import Any, Sequence

from shared.model.codecbook import BOOK
from shared.model.codecs import check_plain
from shared.model.taskcodecs import Compiled, TaskCodecs

_PLAIN = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
_KEYS = frozenset({"args", "kwargs", "retry"})  # what a task's payload may hold
_LAST = 1 << 30  # the position of a keyword-only parameter: after every positional argument


class Binder:
    """A task's signature read once, to bind a call without ``inspect.Signature.bind`` (about
    10 µs a call) when it plainly fits: no ``*args``, ``**kwargs`` or positional-only
    parameter, no more positional arguments than parameters, each keyword a parameter not
    given by position, every parameter without a default given. Anything else goes the way
    of :func:`payload_of` (and :func:`unpack`), so a call that does not bind raises there, with
    the same error as ever."""

    def __init__(self, name: str, signature: inspect.Signature, fn: Any = None) -> None:
        self.name, self.signature = name, signature
        self.codecs = TaskCodecs(name, signature, fn)  # the annotations' codecs, read on first use
        params = list(signature.parameters.values())
        self.plain = all(p.kind in _PLAIN for p in params)
        self.order = tuple(p.name for p in params)  # the signature's order: bind's, and its checks'
        positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        self.index = {n: (positional.index(n) if n in positional else _LAST) for n in self.order}
        self.npos = len(positional)
        self.required = tuple(
            (self.index[p.name], p.name) for p in params if p.default is inspect.Parameter.empty
        )
        # a call by position alone fits with from ``least`` to ``npos`` arguments (a required
        # keyword-only parameter, or a signature that is not plain: never)
        self.least = max([i + 1 for i, _ in self.required], default=0)
        if not self.plain:
            self.least = self.npos + 1
        self.labels = {n: f"argument {n!r}" for n in self.order}

    def fits(self, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
        """Whether the call surely binds (False: let ``Signature.bind`` decide and explain)."""
        n, index = len(args), self.index
        if not kwargs:  # the usual call, by position alone: two comparisons
            return self.least <= n <= self.npos
        if not self.plain or n > self.npos:
            return False
        for key in kwargs:
            if index.get(key, -1) < n:  # not a parameter, or given by position too
                return False
        return all(i < n or pname in kwargs for i, pname in self.required)

    def payload(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """As :func:`payload_of` for this task (the same payload, the same errors)."""
        if not kwargs and self.least <= len(args) <= self.npos:
            c = self.codecs.compiled
            if c is None or c.generation != BOOK.generation:
                c = self.codecs.ready()
            sends, i = c.sends, 0  # (an index: cheaper than zip for a few arguments)
            for value in args:
                kind = type(value)  # a float passes when finite (NaN and infinities differ)
                if kind not in sends[i] or (kind is float and value - value != 0.0):
                    return {"args": self._each(args, c, sends, self.codecs.encode), "kwargs": {}}
                i += 1
            return {"args": list(args), "kwargs": {}}  # the common case, kept cheap
        return self._payload(args, kwargs)

    def _payload(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """:meth:`payload` of a call not by position alone (keywords, or too few or many)."""
        if not self.fits(args, kwargs):
            return payload_of(self.name, self.signature, args, kwargs, self.codecs)
        out_args, out_kwargs = self._convert(args, kwargs, self.codecs.encode)
        return {"args": out_args, "kwargs": dict(kwargs) if out_kwargs is kwargs else out_kwargs}

    def decode(
        self, args: list[Any], kwargs: dict[str, Any], fits: bool | None = None
    ) -> tuple[list[Any], dict[str, Any]]:
        """A stored call's arguments (bound by :func:`unpack`) as the annotations name them:
        TypeError/ValueError naming the task and the argument for one that does not fit.
        ``fits``: :meth:`fits` of the call, when the caller knows it."""
        if not (self.fits(args, kwargs) if fits is None else fits):
            return self.codecs.decode_call(args, kwargs)
        if not kwargs:
            c = self.codecs.compiled
            if c is None or c.generation != BOOK.generation:
                c = self.codecs.ready()
            accepts, i = c.accepts, 0
            for value in args:
                if type(value) not in accepts[i]:
                    return self._each(args, c, accepts, self.codecs.decode), kwargs
                i += 1
            return args, kwargs  # every argument is read as it is: the common case, kept cheap
        return self._convert(args, kwargs, self.codecs.decode, False)

    def _each(self, args: Sequence[Any], c: Compiled, passes: Any, step: Any) -> list[Any]:
        """A new list of a call by position alone: each argument through ``step`` with its
        parameter's codec, but one of a type in its ``passes`` (a float: a finite one)."""
        out = list(args)
        for i, value in enumerate(args):
            kind = type(value)
            if kind not in passes[i] or (kind is float and value - value != 0.0):
                pname = self.order[i]
                out[i] = step(c.params[pname], value, self.labels[pname])
        return out

    def _convert(
        self, args: Sequence[Any], kwargs: dict[str, Any], step: Any, out: bool = True
    ) -> tuple[list[Any], dict[str, Any]]:
        """Each argument of a plainly fitting call through ``step`` (encode, ``out``; or decode)
        with its parameter's codec, in the signature's order; a value of a type its codec
        passes unchanged is not touched (the common case, kept cheap), and the call's own list
        and dict are copied only when one changes."""
        c = self.codecs.compiled
        if c is None or c.generation != BOOK.generation:
            c = self.codecs.ready()
        passes, n = c.sends if out else c.accepts, len(args)
        out_args, out_kwargs = args, kwargs
        for i, pname in enumerate(self.order):
            if i < n:
                value = args[i]
            elif pname in kwargs:
                value = kwargs[pname]
            else:
                continue
            kind = type(value)  # a float passes when finite (the codec refuses NaN on the way in)
            if kind in passes[i] and (kind is not float or value - value == 0.0):
                continue
            new = step(c.params[pname], value, self.labels[pname])
            if new is value:
                continue
            if i < n:
                out_args = out_args if out_args is not args else list(args)
                out_args[i] = new  # type: ignore[index]
            else:
                out_kwargs = out_kwargs if out_kwargs is not kwargs else dict(kwargs)
                out_kwargs[pname] = new
        if out and out_args is args:  # the caller's tuple: the payload's own list
            out_args = list(args)
        return out_args, out_kwargs  # type: ignore[return-value]


def payload_of(
    name: str,
    signature: inspect.Signature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    codecs: TaskCodecs | None = None,
) -> dict[str, Any]:
    """The payload of a call of task ``name``, each argument encoded by its annotation
    (``codecs``: the task's; None: the signature's own annotations); TypeError for arguments
    that do not bind or a value that does not fit (or JSON would change); ValueError for one
    JSON cannot hold (a NaN, a naive datetime). Both name the task and the argument."""
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"task {name!r}: {exc}") from None
    out_args, out_kwargs = (codecs or TaskCodecs(name, signature)).encode_call(args, kwargs)
    return {"args": out_args, "kwargs": out_kwargs}


def check_json(value: Any, name: str, label: str, path: str = "") -> None:
    """Raise unless ``value`` is built only of what JSON gives back as it was: dict (str keys),
    list, str, int, finite float, bool, None (:func:`shared.model.codecs.check_plain`, its
    error naming task ``name``)."""
    try:
        check_plain(value, label, path, _HINTS)
    except (TypeError, ValueError) as exc:
        raise type(exc)(f"task {name!r}: {exc}") from None


_HINTS = {
    "tuple": "it would come back as a list: pass a list",
    "set": "pass a list",
    "frozenset": "pass a list",
    "bytes": "pass text (base64, say)",
    "datetime": "annotate the parameter datetime, and jobq carries it as ISO text",
    "date": "annotate the parameter date, and jobq carries it as ISO text",
    "Decimal": "annotate the parameter Decimal, and jobq carries it as text",
    "UUID": "annotate the parameter UUID, and jobq carries it as text",
}


def unpack(
    name: str, signature: inspect.Signature, payload: Any, binder: Binder | None = None
) -> tuple[list[Any], dict[str, Any]]:
    """The ``(args, kwargs)`` of a stored payload, bound to the signature: TypeError/ValueError
    naming the task when the payload is not ``{"args": list, "kwargs": object}`` (either may be
    left out; a ``"retry"`` beside them is the job's own retry rule: shared.model.retryrules)
    or does not fit the function (``binder``: the signature's, to skip ``bind`` when
    the payload plainly fits)."""
    if binder is not None and type(payload) is dict and len(payload) == 2:
        args, kwargs = payload.get("args"), payload.get("kwargs")
        if type(args) is list and type(kwargs) is dict and binder.fits(args, kwargs):
            return args, kwargs  # the usual payload, as the producer writes it
    if payload is None:
        payload = {}
    if not isinstance(payload, dict) or set(payload) - _KEYS:
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
