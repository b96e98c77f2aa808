"""Codecs: a value of an everyday Python type as plain JSON and back, chosen by its annotation
(never by tags in the data: the stored JSON reads as what a person would write).

A :class:`Codec` turns a value its annotation admits into plain JSON (dicts with text keys,
lists, text, integers, finite floats, booleans, None) with ``encode``, and such JSON back into
the value with ``decode``. ``encode`` raises TypeError for a value of another type and
ValueError for one of the right type that JSON cannot carry (a naive datetime, a NaN);
``decode`` raises TypeError or ValueError for JSON that is not what ``encode`` gives. Every
error names ``label`` (who holds the value, such as ``argument 'when'``) and the path inside it
(``[2]``, ``.customer``, ``['eu']``).

``accepts`` is the set of exact types whose stored values ``decode`` gives back unchanged, and
``writes`` those whose values ``encode`` gives unchanged (``int`` for an ``int`` annotation);
``floats`` says that a finite ``float`` is written unchanged too (a ``float`` is read as it is
but checked on the way in: the caller that skips ``encode`` for one checks it is finite).
Callers skip the call for them, which keeps plain arguments as cheap as they were. ``fits``
says whether ``encode`` takes a value (how a union picks its member). Which codec an
annotation gets is :mod:`shared.model.codecbook`'s business; the codecs of containers, unions
and records of fields are in :mod:`shared.model.shapes`.
"""

from __future__ import annotations

import math
from typing import Any, Callable

NONE = type(None)
_SCALARS = (str, int, float, bool, NONE)


def short(value: Any) -> str:
    """``repr`` of a value, cut to 80 characters for an error message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_plain(
    value: Any, label: str, path: str = "", hints: dict[str, str] | None = None
) -> None:
    """Raise unless ``value`` is built only of what JSON gives back as it was: dict (text keys),
    list, str, int, finite float, bool, None. ``hints``: type name -> what to do instead, for
    the message about a value of another type."""
    kind = type(value)
    if kind in _SCALARS:
        if kind is float and not math.isfinite(value):
            raise ValueError(f"{label}{path} is {value!r}, which JSON cannot hold")
        return
    if kind is list:
        for i, item in enumerate(value):
            check_plain(item, label, f"{path}[{i}]", hints)
        return
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise TypeError(
                    f"{label}{path} has the key {key!r}; JSON keys are "
                    f"strings (it would come back as {str(key)!r})"
                )
            check_plain(item, label, f"{path}[{key!r}]", hints)
        return
    hint = "pass str, int, float, bool, None, list or dict"
    if hints is not None:
        hint = hints.get(kind.__name__, hint)
    raise TypeError(
        f"{label}{path} is a {kind.__name__} value, which JSON does not give back unchanged: {hint}"
    )


class Codec:
    """What every codec has: ``hint`` (the annotation as text, for errors), ``accepts``, and
    the error of a value that does not fit."""

    hint = "?"
    accepts: frozenset[type] = frozenset()
    writes: frozenset[type] = frozenset()
    floats = False  # a finite float is written unchanged (not in ``writes``: it is checked)
    plain = False  # JSON's own values, unchanged both ways: a result needs no encoding

    def fits(self, value: Any) -> bool:
        raise NotImplementedError

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        raise NotImplementedError

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        raise NotImplementedError

    def mismatch(self, value: Any, label: str, path: str) -> TypeError:
        return TypeError(
            f"{label}{path} is a {type(value).__name__} value, which does not fit its "
            f"annotation {self.hint}"
        )

    def unreadable(self, data: Any, label: str, path: str, why: Any = "") -> ValueError:
        why = f": {why}" if str(why) else ""
        return ValueError(f"{label}{path} cannot be read as {self.hint} from {short(data)}{why}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.hint}>"


class Passthrough(Codec):
    """Any JSON value, passed through (checked on encode, as before annotations counted):
    ``Any``, ``object``, a type variable, no annotation, or one that could not be resolved
    (``note`` then says why, in the error of a value JSON would change)."""

    accepts = frozenset({str, int, float, bool, NONE, list, dict})  # JSON's own: as they are
    writes = frozenset({str, int, bool, NONE})  # a list or dict is checked all through
    floats = plain = True

    def __init__(self, hint: str = "Any", note: str | None = None) -> None:
        self.hint, self.note = hint, note
        self.hints = None if note is None else _NoteHints(note)

    def fits(self, value: Any) -> bool:
        return True

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        check_plain(value, label, path, self.hints)
        return value

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        return data


class _NoteHints(dict):  # type: ignore[type-arg]
    """Every type's hint is the note on the annotation (see :class:`Passthrough`)."""

    def __init__(self, note: str) -> None:
        super().__init__()
        self.note = note

    def get(self, key: Any, default: Any = None) -> Any:
        return self.note


class Scalar(Codec):
    """``str``, ``int``, ``float``, ``bool`` or ``None``: JSON's own. A ``float`` parameter
    takes an ``int`` (and decodes one to a float); a ``bool`` is an ``int``, as in Python."""

    plain = True

    def __init__(self, kind: type) -> None:
        self.kind, self.hint = kind, "None" if kind is NONE else kind.__name__
        self.takes: tuple[type, ...] = (int, float) if kind is float else (kind,)
        # an int read for a float is made a float; a float written is checked (NaN, infinities)
        self.accepts = frozenset({int, bool} if kind is int else {kind})
        self.writes = frozenset({int, bool} if kind in (int, float) else {kind})
        self.floats = kind is float

    def fits(self, value: Any) -> bool:
        return isinstance(value, self.takes)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if not isinstance(value, self.takes):
            raise self.mismatch(value, label, path)
        if type(value) is float and not math.isfinite(value):
            raise ValueError(f"{label}{path} is {value!r}, which JSON cannot hold")
        return value

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        if not isinstance(data, self.takes):
            raise self.unreadable(data, label, path)
        return float(data) if self.kind is float and type(data) is not float else data


class Leaf(Codec):
    """A type of one value: its ``to_json`` and ``from_json`` (the built-in codecs of datetime,
    UUID, Decimal, Enum, Path and the others, and the ones :func:`shared.model.codecbook.codec`
    registers). ``refuse(value)``: why a value of the type is still refused, or None.
    ``trusted``: ``to_json`` gives plain JSON (else its output is checked)."""

    def __init__(
        self,
        cls: type,
        to_json: Callable[[Any], Any],
        from_json: Callable[[Any], Any],
        refuse: Callable[[Any], str | None] | None = None,
        trusted: bool = True,
        hint: str | None = None,
    ) -> None:
        self.cls, self.to_json, self.from_json = cls, to_json, from_json
        self.refuse, self.trusted = refuse, trusted
        self.hint = hint or getattr(cls, "__qualname__", str(cls))

    def fits(self, value: Any) -> bool:
        return isinstance(value, self.cls)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if not isinstance(value, self.cls):
            raise self.mismatch(value, label, path)
        why = None if self.refuse is None else self.refuse(value)
        if why is not None:
            raise ValueError(f"{label}{path} is {short(value)}: {why}")
        try:
            out = self.to_json(value)
        except Exception as exc:  # noqa: BLE001 - the user's encoder: its error is the value's
            raise ValueError(f"{label}{path}: {self.hint} encoder failed: {exc!r}") from None
        if not self.trusted:
            check_plain(out, f"{label}{path}", f" (encoded as {self.hint})")
        return out

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        try:
            value = self.from_json(data)
        except Exception as exc:  # noqa: BLE001 - any decoder error means this data does not fit
            raise self.unreadable(data, label, path, exc) from None
        why = None if self.refuse is None else self.refuse(value)
        if why is not None:
            raise self.unreadable(data, label, path, why)
        return value


class Choice(Codec):
    """``Literal[...]``: one of the given plain values."""

    plain = True

    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values
        self.hint = f"Literal[{', '.join(map(repr, values))}]"

    def fits(self, value: Any) -> bool:
        return any(type(value) is type(v) and value == v for v in self.values)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if not self.fits(value):
            raise ValueError(f"{label}{path} is {short(value)}, not one of {self.hint}")
        return value

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        if not self.fits(data):
            raise self.unreadable(data, label, path)
        return data
