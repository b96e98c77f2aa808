"""The codecs of values made of other values: containers (``list[X]``, ``tuple[X, ...]``,
``set[X]``, ``dict[K, V]``), unions (``X | None``), and records of fields (dataclasses,
``TypedDict``, pydantic models), each built from its parts' codecs
(:mod:`shared.model.codecs`; :mod:`shared.model.codecbook` builds them from annotations).

A container is a JSON list (a set's in its iteration order) or a JSON object; a record is a
JSON object of its fields by name; a union member is chosen by the value on the way in and by
trying the members in the annotation's order on the way out (None first), so ``UUID | str``
reads a UUID's text as a UUID.
"""

from __future__ import annotations

from typing import Any

from shared.model.codecs import NONE, Codec, Passthrough, Scalar, check_plain, short


class ListOf(Codec):
    """A homogeneous sequence: ``kind`` is what the value is (list, tuple, set, frozenset),
    ``takes`` what ``encode`` admits; stored as a JSON list."""

    def __init__(self, item: Codec, kind: type, takes: tuple[type, ...], hint: str) -> None:
        self.item, self.kind, self.takes, self.hint = item, kind, takes, hint
        self.plain = kind is list and item.plain

    def fits(self, value: Any) -> bool:
        return isinstance(value, self.takes)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if not isinstance(value, self.takes):
            raise self.mismatch(value, label, path)
        item, fast = self.item, self.item.writes
        return [
            x if type(x) in fast else item.encode(x, label, f"{path}[{i}]")
            for i, x in enumerate(value)
        ]

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        if type(data) is not list:
            raise self.unreadable(data, label, path)
        item, fast = self.item, self.item.accepts
        out = [
            x if type(x) in fast else item.decode(x, label, f"{path}[{i}]")
            for i, x in enumerate(data)
        ]
        return out if self.kind is list else self.kind(out)


class FixedTuple(Codec):
    """``tuple[X, Y, ...]`` of a fixed length: a JSON list of that length."""

    def __init__(self, items: list[Codec]) -> None:
        self.items = items
        self.hint = f"tuple[{', '.join(c.hint for c in items) or '()'}]"

    def fits(self, value: Any) -> bool:
        return isinstance(value, tuple) and len(value) == len(self.items)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if not self.fits(value):
            raise self.mismatch(value, label, path)
        return [
            c.encode(x, label, f"{path}[{i}]") for i, (c, x) in enumerate(zip(self.items, value))
        ]

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        if type(data) is not list or len(data) != len(self.items):
            raise self.unreadable(data, label, path)
        return tuple(
            c.decode(x, label, f"{path}[{i}]") for i, (c, x) in enumerate(zip(self.items, data))
        )


class DictOf(Codec):
    """``dict[K, V]``: a JSON object. Its keys are text: a ``str`` key as it is, an ``int`` key
    as its digits, any other key as its codec's text (a UUID, a date, an Enum of text)."""

    def __init__(self, key: Codec, value: Codec, hint: str) -> None:
        self.key, self.value, self.hint = key, value, hint
        self.text_keys = isinstance(key, Passthrough) or (
            isinstance(key, Scalar) and key.kind is str
        )
        self.plain = self.text_keys and value.plain

    def fits(self, value: Any) -> bool:
        return isinstance(value, dict)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if not isinstance(value, dict):
            raise self.mismatch(value, label, path)
        codec, fast = self.value, self.value.writes
        out = {}
        for k, v in value.items():
            text = self._key_out(k, label, path)
            out[text] = v if type(v) in fast else codec.encode(v, label, f"{path}[{k!r}]")
        return out

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        if type(data) is not dict:
            raise self.unreadable(data, label, path)
        codec, fast = self.value, self.value.accepts
        return {
            self._key_in(k, label, path): v
            if type(v) in fast
            else codec.decode(v, label, f"{path}[{k!r}]")
            for k, v in data.items()
        }

    def _key_out(self, key: Any, label: str, path: str) -> str:
        if type(key) is str and self.text_keys:
            return key
        if isinstance(self.key, Scalar) and self.key.kind is int and isinstance(key, int):
            return str(int(key))
        text = self.key.encode(key, label, f"{path} key {short(key)}")
        if type(text) is not str:
            raise TypeError(
                f"{label}{path} has the key {key!r}; JSON keys are strings, and "
                f"{self.key.hint} does not encode as one"
            )
        return text

    def _key_in(self, key: str, label: str, path: str) -> Any:
        if self.text_keys:
            return key
        if isinstance(self.key, Scalar) and self.key.kind is int:
            try:
                return int(key)
            except ValueError:
                raise self.key.unreadable(key, label, f"{path} key") from None
        return self.key.decode(key, label, f"{path} key")


class UnionOf(Codec):
    """``X | Y | ...``: the first member that fits encodes; decoding tries them in order
    (None first, when the union has it). ``accepts``, ``writes`` and ``floats``: None's, and
    the plain members' when every other member is plain too (nothing then reads a value
    otherwise)."""

    def __init__(self, members: list[Codec]) -> None:
        self.none = any(isinstance(m, Scalar) and m.kind is NONE for m in members)
        self.members = [m for m in members if not (isinstance(m, Scalar) and m.kind is NONE)]
        self.hint = " | ".join([m.hint for m in self.members] + (["None"] if self.none else []))
        plain = all(isinstance(m, (Scalar, Passthrough)) for m in self.members)
        accepts = {NONE} if self.none else set()
        writes = set(accepts)
        if plain:
            for m in self.members:
                accepts |= m.accepts
                writes |= m.writes
        self.accepts, self.writes = frozenset(accepts), frozenset(writes)
        self.floats = plain and any(m.floats for m in self.members)
        self.plain = all(m.plain for m in self.members)

    def fits(self, value: Any) -> bool:
        return (value is None and self.none) or any(m.fits(value) for m in self.members)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if value is None and self.none:
            return None
        for m in self.members:
            if m.fits(value):
                return m.encode(value, label, path)
        raise self.mismatch(value, label, path)

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        if data is None and self.none:
            return None
        errors = []
        for m in self.members:
            try:
                return m.decode(data, label, path)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise self.unreadable(data, label, path, "; ".join(errors[:3]))


class Record(Codec):
    """A dataclass: a JSON object of its ``init`` fields by name. ``fields`` is filled after
    the codec is made (a field may hold the class itself: ``children: list[Node]``)."""

    def __init__(self, cls: type) -> None:
        self.cls, self.hint = cls, cls.__qualname__
        self.fields: dict[str, Codec] = {}

    def fits(self, value: Any) -> bool:
        return isinstance(value, self.cls)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if not isinstance(value, self.cls):
            raise self.mismatch(value, label, path)
        return {
            name: c.encode(getattr(value, name), label, f"{path}.{name}")
            for name, c in self.fields.items()
        }

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        if type(data) is not dict:
            raise self.unreadable(data, label, path)
        unknown = [k for k in data if k not in self.fields]
        if unknown:
            raise self.unreadable(data, label, path, f"{self.hint} has no field {unknown[0]!r}")
        kwargs = {k: self.fields[k].decode(v, label, f"{path}.{k}") for k, v in data.items()}
        try:
            return self.cls(**kwargs)
        except (TypeError, ValueError) as exc:
            raise self.unreadable(data, label, path, exc) from None


class TypedRecord(Codec):
    """A ``TypedDict``: a dict whose known keys go through their codecs (others as plain JSON);
    the required keys must be there. ``fields`` is filled after the codec is made."""

    def __init__(self, cls: type) -> None:
        self.cls, self.hint = cls, cls.__qualname__
        self.fields: dict[str, Codec] = {}
        self.required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())

    def fits(self, value: Any) -> bool:
        return isinstance(value, dict)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if not isinstance(value, dict):
            raise self.mismatch(value, label, path)
        self._complete(value, label, path)
        out = {}
        for k, v in value.items():
            if k in self.fields:
                out[k] = self.fields[k].encode(v, label, f"{path}[{k!r}]")
            else:
                check_plain({k: v}, label, path)
                out[k] = v
        return out

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        if type(data) is not dict:
            raise self.unreadable(data, label, path)
        self._complete(data, label, path)
        return {
            k: self.fields[k].decode(v, label, f"{path}[{k!r}]") if k in self.fields else v
            for k, v in data.items()
        }

    def _complete(self, value: dict[str, Any], label: str, path: str) -> None:
        missing = sorted(self.required - value.keys())
        if missing:
            raise ValueError(f"{label}{path} lacks the key {missing[0]!r} of {self.hint}")


class Model(Codec):
    """A pydantic model: ``model_dump(mode="json")`` and ``model_validate`` (pydantic's own
    JSON forms of its fields; its validation errors are the value's)."""

    def __init__(self, cls: Any) -> None:
        self.cls, self.hint = cls, cls.__qualname__

    def fits(self, value: Any) -> bool:
        return isinstance(value, self.cls)

    def encode(self, value: Any, label: str, path: str = "") -> Any:
        if not isinstance(value, self.cls):
            raise self.mismatch(value, label, path)
        return value.model_dump(mode="json")

    def decode(self, data: Any, label: str, path: str = "") -> Any:
        try:
            return self.cls.model_validate(data)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError
            raise self.unreadable(data, label, path, str(exc).replace("\n", " ")) from None
