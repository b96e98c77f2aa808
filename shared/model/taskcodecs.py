"""A task's arguments and result through the codecs of its annotations
(:mod:`shared.model.codecbook`): encoded at enqueue and decoded in the worker, so the function
gets the types its signature names and the stored payload stays plain JSON.

The annotations are read on first use, not when ``@task`` runs (a module's later classes and
codecs are known by then), and again after a codec is registered. One that cannot be resolved
passes JSON through as before (its error says why). Every error is a TypeError or ValueError
naming the task and the argument (``argument 'when'``, ``argument *rest[1]``, ``the result``)
and the path inside it; a worker fails the job for good with it (no retry would fix it).

A result is encoded only when its annotation converts something (``-> UUID``, ``-> Order``):
a plain one (``-> dict``, ``-> list[int]``) goes to JSON as it did (a tuple as a list).
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Sequence

from shared.model.codecbook import BOOK, codec_of
from shared.model.codecs import Codec

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
Step = Callable[[Codec, Any, str], Any]


class Compiled:
    """A task's codecs for one generation of the book: ``params`` by name, ``accepts`` and
    ``writes`` in the signature's order (the types each parameter's decode and encode pass
    unchanged), ``sends`` (``writes`` with ``float`` where a finite one is written unchanged:
    the caller checks it is finite), ``result``."""

    def __init__(self, signature: inspect.Signature, hints: dict[str, Any]) -> None:
        self.generation = BOOK.generation
        params = list(signature.parameters.values())
        self.params = {p.name: codec_of(hints.get(p.name, Any)) for p in params}
        self.accepts = tuple(self.params[p.name].accepts for p in params)
        self.writes = tuple(self.params[p.name].writes for p in params)
        self.sends = tuple(
            c.writes | {float} if c.floats else c.writes
            for c in (self.params[p.name] for p in params)
        )
        self.kinds = [(p.name, p.kind) for p in params]
        self.positional = [p.name for p in params if p.kind in _POSITIONAL]
        self.keywords = frozenset(p.name for p in params if p.kind in _KEYWORD)
        self.result = codec_of(hints.get("return", Any))


class TaskCodecs:
    """The codecs of task ``name`` with ``signature`` (the one its callers fill), read from
    ``fn``'s annotations (resolved in its module)."""

    def __init__(self, name: str, signature: inspect.Signature, fn: Any = None) -> None:
        self.name, self.signature, self.fn = name, signature, fn
        self.compiled: Compiled | None = None

    def ready(self) -> Compiled:
        """The compiled codecs, (re)compiled when missing or older than the book."""
        c = self.compiled
        if c is None or c.generation != BOOK.generation:
            c = self.compiled = Compiled(self.signature, hints_of(self.fn, self.signature))
        return c

    def encode(self, codec: Codec, value: Any, label: str) -> Any:
        """``codec.encode`` with the task named in its error."""
        try:
            return codec.encode(value, label)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"task {self.name!r}: {exc}") from None

    def decode(self, codec: Codec, data: Any, label: str) -> Any:
        """``codec.decode`` with the task named in its error."""
        try:
            return codec.decode(data, label)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"task {self.name!r}: {exc}") from None

    def encode_call(
        self, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """The JSON of a call's arguments (already bound: they fit the signature), checked in
        the signature's order."""
        return self._walk(args, kwargs, self.encode, True)

    def decode_call(
        self, args: Sequence[Any], kwargs: dict[str, Any]
    ) -> tuple[list[Any], dict[str, Any]]:
        """A stored call's arguments as the function's annotations name them."""
        return self._walk(args, kwargs, self.decode, False)

    def encode_result(self, value: Any) -> Any:
        """The JSON of the function's return value (a plain annotation's: the value itself)."""
        codec = self.ready().result
        return value if codec.plain else self.encode(codec, value, "the result")

    def decode_result(self, data: Any) -> Any:
        """A stored result as the function's return annotation names it."""
        codec = self.ready().result
        return data if codec.plain else self.decode(codec, data, "the result")

    def _walk(
        self, args: Sequence[Any], kwargs: dict[str, Any], step: Step, out: bool
    ) -> tuple[list[Any], dict[str, Any]]:
        c = self.ready()
        one = _write if out else _read
        out_args, out_kwargs = list(args), dict(kwargs)
        npos = len(c.positional)
        for name, kind in c.kinds:
            codec = c.params[name]
            if kind in _POSITIONAL:
                j = c.positional.index(name)
                if j < len(args):
                    out_args[j] = one(step, codec, args[j], f"argument {name!r}")
                elif kind in _KEYWORD and name in kwargs:
                    out_kwargs[name] = one(step, codec, kwargs[name], f"argument {name!r}")
            elif kind is inspect.Parameter.VAR_POSITIONAL:
                for i in range(npos, len(args)):
                    label = f"argument *{name}[{i - npos}]"
                    out_args[i] = one(step, codec, args[i], label)
            elif kind is inspect.Parameter.KEYWORD_ONLY:
                if name in kwargs:
                    out_kwargs[name] = one(step, codec, kwargs[name], f"argument {name!r}")
            else:  # **kwargs: every keyword that names no other parameter
                for key in kwargs:
                    if key not in c.keywords:
                        out_kwargs[key] = one(step, codec, kwargs[key], f"argument {key!r}")
        return out_args, out_kwargs


def _write(step: Step, codec: Codec, value: Any, label: str) -> Any:
    return value if type(value) in codec.writes else step(codec, value, label)


def _read(step: Step, codec: Codec, value: Any, label: str) -> Any:
    return value if type(value) in codec.accepts else step(codec, value, label)


def hints_of(fn: Any, signature: inspect.Signature) -> dict[str, Any]:
    """``fn``'s annotations by parameter name (and ``"return"``), resolved in its module; one
    that cannot be resolved is left as its text (its codec passes JSON through and says why).
    Without ``fn``: the signature's own annotations."""
    if fn is not None:
        try:
            return typing.get_type_hints(fn)
        except Exception:  # noqa: BLE001 - one bad annotation: resolve the others one by one
            pass
    namespace = dict(getattr(fn, "__globals__", {}))
    out = {
        p.name: _resolved(p.annotation, namespace)
        for p in signature.parameters.values()
        if p.annotation is not inspect.Parameter.empty
    }
    if signature.return_annotation is not inspect.Signature.empty:
        out["return"] = _resolved(signature.return_annotation, namespace)
    return out


def _resolved(hint: Any, namespace: dict[str, Any]) -> Any:
    if not isinstance(hint, str):
        return hint
    try:
        return eval(hint, namespace)  # noqa: S307 - an annotation, evaluated as typing does
    except Exception as exc:  # noqa: BLE001 - kept as text, with why
        return f"{hint} ({type(exc).__name__}: {exc})"
