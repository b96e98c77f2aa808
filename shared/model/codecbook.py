"""Which codec an annotation gets (:func:`codec_of`), and the user's own (:func:`codec`).

First match wins: a codec the user registered for the class or one of its bases (nearest
first); JSON's own scalars; the everyday types (``datetime`` with its zone as ISO text,
``date``, ``time``, ``timedelta`` as seconds, ``UUID`` and ``Decimal`` as text, ``Path`` as
text, an ``Enum`` as its value); dataclasses, ``TypedDict`` and pydantic models (recognised
only when the application imported pydantic: nothing here imports it); containers and unions
of these (:mod:`shared.model.shapes`). Anything else (``Any``, no annotation, a class with no
codec, an annotation that could not be resolved) passes JSON through as before annotations
counted (:class:`shared.model.codecs.Passthrough`).

The book is the process's one table (``BOOK``): a module that declares tasks registers its
types when it is imported, in the producer and in every worker alike. Registering bumps
``BOOK.generation``, so codecs compiled before it are compiled again on their next use.
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import datetime as dt
import enum
import sys
import threading
import types
import typing
import uuid
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Callable

from shared.model.codecs import NONE, Codec, Choice, Leaf, Passthrough, Scalar
from shared.model.shapes import DictOf, FixedTuple, ListOf, Model, Record, TypedRecord, UnionOf

ANY = Passthrough()


class Book:
    """The user's codecs (``own``: class -> (encode, decode)), the codecs compiled from
    annotations (``compiled``), and ``generation``, bumped by each registration."""

    def __init__(self) -> None:
        self.own: dict[type, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {}
        self.compiled: dict[Any, Codec] = {}
        self.generation = 0
        self.lock = threading.RLock()  # compiling fills the cache in steps (recursive records)


BOOK = Book()


def codec(cls: type, *, encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> None:
    """Carry values of ``cls`` (and of its subclasses without a codec of their own) by
    annotation: ``encode(value)`` gives plain JSON, ``decode(json)`` the value back. Registered
    again, the last one counts. Register it in the module that declares the tasks using it
    (workers import that module, so theirs are registered too)."""
    if not isinstance(cls, type):
        raise TypeError(f"jobq.codec: the first argument must be a class, got {cls!r}")
    for what, fn in (("encode", encode), ("decode", decode)):
        if not callable(fn):
            raise TypeError(f"jobq.codec({cls.__qualname__}): {what} must be callable, got {fn!r}")
    with BOOK.lock:
        BOOK.own[cls] = (encode, decode)
        BOOK.compiled.clear()
        BOOK.generation += 1


def codec_of(annotation: Any) -> Codec:
    """The codec of values annotated ``annotation`` (a resolved annotation, not its text)."""
    try:
        found = BOOK.compiled.get(annotation)
    except TypeError:  # an unhashable annotation (Literal of a list, say): not cached
        found = None
    if found is not None:
        return found
    with BOOK.lock:
        return _compile(annotation)


def _compile(tp: Any) -> Codec:
    try:
        found = BOOK.compiled.get(tp)
    except TypeError:
        return _build(tp)
    if found is None:
        found = _build(tp)
        BOOK.compiled[tp] = found
    return found


def _build(tp: Any) -> Codec:
    if tp is Any or tp is object or tp is dataclasses.MISSING or isinstance(tp, typing.TypeVar):
        return ANY
    if tp is None or tp is NONE:
        return Scalar(NONE)
    if isinstance(tp, str):  # a forward reference left unresolved
        return Passthrough(tp, f"its annotation {tp!r} could not be resolved")
    origin = typing.get_origin(tp)
    if origin is not None:
        return _generic(tp, origin, typing.get_args(tp))
    if hasattr(tp, "__supertype__"):  # a NewType
        return _compile(tp.__supertype__)
    if isinstance(tp, type):
        return _class(tp)
    return Passthrough(repr(tp))


def _generic(tp: Any, origin: Any, args: tuple[Any, ...]) -> Codec:
    name = _name(tp)
    if origin is typing.Annotated:
        return _compile(args[0])
    if origin is typing.Union or origin is types.UnionType:
        return UnionOf([_compile(a) for a in args])
    if origin is typing.Literal:
        return Choice(args)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return ListOf(_compile(args[0]), tuple, (tuple,), name)
        return FixedTuple([_compile(a) for a in args if a != ()])
    if origin in _SEQUENCES:
        kind, takes = _SEQUENCES[origin]
        return ListOf(_compile(args[0]) if args else ANY, kind, takes, name)
    if origin in (dict, abc.Mapping, abc.MutableMapping):
        key, value = (args + (Any, Any))[:2] if args else (Any, Any)
        return DictOf(_compile(key), _compile(value), name)
    return _compile(origin)  # a generic class of the user's: its class decides


_SEQUENCES: dict[Any, tuple[type, tuple[type, ...]]] = {
    list: (list, (list,)),
    abc.Sequence: (list, (list, tuple)),
    abc.MutableSequence: (list, (list,)),
    abc.Collection: (list, (list, tuple, set, frozenset)),
    abc.Iterable: (list, (list, tuple, set, frozenset)),
    set: (set, (set,)),
    abc.Set: (frozenset, (set, frozenset)),
    abc.MutableSet: (set, (set,)),
    frozenset: (frozenset, (frozenset,)),
}


def _class(cls: type) -> Codec:
    for base in cls.__mro__:
        if base in BOOK.own:
            encode, decode = BOOK.own[base]
            return Leaf(cls, encode, decode, trusted=False)
    if cls in (str, int, float, bool):
        return Scalar(cls)
    if cls in (list, tuple, set, frozenset, dict):
        return _generic(cls, cls, ())
    for base in cls.__mro__:
        if base in _EVERYDAY:
            return _EVERYDAY[base](cls)
    return _structured(cls)


def _structured(cls: type) -> Codec:
    if dataclasses.is_dataclass(cls):
        record: Record | TypedRecord = Record(cls)
        BOOK.compiled[cls] = record  # before its fields: a field may hold the class itself
        hints = _hints(cls)
        record.fields = {
            f.name: _compile(hints.get(f.name, Any)) for f in dataclasses.fields(cls) if f.init
        }
        return record
    if typing.is_typeddict(cls):
        record = TypedRecord(cls)
        BOOK.compiled[cls] = record
        record.fields = {k: _compile(v) for k, v in _hints(cls).items()}
        return record
    pydantic = sys.modules.get("pydantic")  # only when the application uses it
    if pydantic is not None and issubclass(cls, pydantic.BaseModel):
        return Model(cls)
    return Passthrough(
        cls.__qualname__,
        f"jobq has no codec for {cls.__qualname__}: register one with "
        f"jobq.codec({cls.__qualname__}, encode=..., decode=...), or pass plain JSON",
    )


def _hints(cls: type) -> dict[str, Any]:
    """A class's field annotations, resolved in its module (unresolvable ones left as text)."""
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - a name that cannot be resolved: each field on its own
        out = {}
        module = vars(sys.modules.get(cls.__module__, types.ModuleType("?")))
        for klass in reversed(cls.__mro__):
            for name, hint in getattr(klass, "__annotations__", {}).items():
                out[name] = _resolve(hint, module)
        return out


def _resolve(hint: Any, namespace: dict[str, Any]) -> Any:
    """``hint`` evaluated in ``namespace`` if it is text; the text itself when it cannot be."""
    if not isinstance(hint, str):
        return hint
    try:
        return eval(hint, dict(namespace))  # noqa: S307 - an annotation, as typing does
    except Exception:  # noqa: BLE001 - left as text: Passthrough says it could not be resolved
        return hint


def _name(tp: Any) -> str:
    text = repr(tp)
    return text.replace("typing.", "").replace("collections.abc.", "")


# -- the everyday types --------------------------------------------------------------------


def _aware(value: dt.datetime) -> str | None:
    if value.tzinfo is None or value.utcoffset() is None:
        return "a naive datetime: give it a time zone (datetime.now(timezone.utc), say)"
    return None


def _exact_date(value: dt.date) -> str | None:
    return "a datetime, not a date: pass .date()" if isinstance(value, dt.datetime) else None


def _text(parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def read(data: Any) -> Any:
        if type(data) is not str:
            raise TypeError(f"expected text, got {type(data).__name__}")
        return parse(data)

    return read


def _seconds(value: dt.timedelta) -> float | int:
    seconds = value.total_seconds()
    return int(seconds) if seconds.is_integer() else seconds


def _from_seconds(data: Any) -> dt.timedelta:
    if type(data) not in (int, float):
        raise TypeError(f"expected a number of seconds, got {type(data).__name__}")
    return dt.timedelta(seconds=data)


def _decimal(data: Any) -> Decimal:
    if type(data) not in (str, int):
        raise TypeError(f"expected text (or an integer), got {type(data).__name__}")
    return Decimal(data)


def _enum(cls: type) -> Codec:
    def read(data: Any) -> Any:
        return cls(data)

    return Leaf(cls, lambda v: v.value, read, trusted=False)


def _path(cls: type) -> Codec:
    return Leaf(cls, str, _text(cls))


_EVERYDAY: dict[type, Callable[[type], Codec]] = {
    dt.datetime: lambda c: Leaf(c, c.isoformat, _text(dt.datetime.fromisoformat), _aware),
    dt.date: lambda c: Leaf(c, c.isoformat, _text(dt.date.fromisoformat), _exact_date),
    dt.time: lambda c: Leaf(c, c.isoformat, _text(dt.time.fromisoformat)),
    dt.timedelta: lambda c: Leaf(c, _seconds, _from_seconds),
    uuid.UUID: lambda c: Leaf(c, str, _text(uuid.UUID)),
    Decimal: lambda c: Leaf(c, str, _decimal),
    enum.Enum: _enum,
    PurePath: _path,
}
