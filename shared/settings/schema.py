"""How a configuration key is declared: :class:`Key` (accepted types, range, meaning) and
:func:`setting` / :func:`section`, which attach a Key to a dataclass field.

A key is declared once, as one field of a dataclass in :mod:`shared.settings.sections` (a
table's key) or :mod:`shared.settings.config` (a top-level key)::

    workers: int = setting(2, number(0, 256, integer=True), "Number of worker processes.")

Validation, ``jobq config init``'s commented file, the shipped ``jobq.toml`` and
``docs/configuration.md`` are all derived from those fields (:func:`keys_of`), so adding a key
is a one-line change there.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from shared.model.bounds import MAX_TYPE_LEN, type_name_error

KEY = "jobq.key"  # field metadata: the field's Key
SECTION = "jobq.section"  # field metadata: the section's dataclass
DOC = "jobq.doc"  # field metadata: the section's description
REQUIRED = object()  # default of a key that must be given (a [[schedule]]'s name, type, cron)


class ConfigError(ValueError):
    """The configuration is invalid; the message names the file, key, value and expectation."""


@dataclass(frozen=True)
class Key:
    """How one key is checked: accepted Python types, a range/choice check, and its meaning.

    ``expected`` is the phrase errors and the reference use ("an integer >= 0 and <= 256");
    ``doc`` says what the key does (one paragraph, plain text, may contain `code`); ``shown``
    is how an error shows a refused value (a URL's password hidden).
    """

    types: tuple[type, ...]
    expected: str
    check: Callable[[Any], bool] = lambda v: True
    doc: str = ""
    shown: Callable[[Any], Any] = lambda v: v

    @property
    def type_name(self) -> str:
        """The TOML type a reader should write: integer, number, string, array or table."""
        names = {
            int: "integer",
            float: "number",
            str: "string",
            list: "array of strings",
            dict: "table",
            bool: "boolean",
        }
        return names[float] if float in self.types else names[self.types[0]]


def number(
    lo: float | None = None,
    hi: float | None = None,
    *,
    integer: bool = False,
    open_lo: bool = False,
) -> Key:
    """An integer (``integer=True``) or a number in ``[lo, hi]`` (``(lo, hi]`` if ``open_lo``)."""
    types: tuple[type, ...] = (int,) if integer else (int, float)
    words = "an integer" if integer else "a number"
    parts = []
    if lo is not None:
        parts.append(f"{'>' if open_lo else '>='} {_fmt(lo)}")
    if hi is not None:
        parts.append(f"<= {_fmt(hi)}")
    expected = words + (" " + " and ".join(parts) if parts else "")

    def check(v: Any) -> bool:
        if isinstance(v, float) and not math.isfinite(v):
            return False
        if lo is not None and (v <= lo if open_lo else v < lo):
            return False
        return hi is None or v <= hi

    return Key(types, expected, check)


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(x)


def choice(*options: str) -> Key:
    return Key((str,), "one of " + ", ".join(repr(o) for o in options), lambda v: v in options)


def list_of_str() -> Key:
    return Key(
        (list,),
        "a list of module names (strings)",
        lambda v: all(isinstance(x, str) and x for x in v),
    )


NONEMPTY_STR = Key((str,), "a non-empty string", lambda v: bool(v))
BOOLEAN = Key((bool,), "true or false")
JOB_TYPE = Key(
    (str,),
    f"a job type name, as enqueue takes it: a non-empty string of at most {MAX_TYPE_LEN} "
    "characters, no control characters",
    lambda v: type_name_error(v) is None,
)


def check_value(source: str, dotted: str, key: Key, value: Any) -> Any:
    """``value`` if ``key`` accepts it, else ConfigError naming ``source``, the key and the value.
    A boolean is only accepted where the key is one (TOML true is not the integer 1)."""
    ok_type = isinstance(value, key.types) and isinstance(value, bool) == (bool in key.types)
    if not ok_type or not key.check(value):
        raise ConfigError(
            f"{source}: key '{dotted}' = {key.shown(value)!r}: expected {key.expected}"
        )
    return value


def check_table(
    source: str, prefix: str, keys: dict[str, Key], value: Any, what: str
) -> dict[str, Any]:
    """Check one table (``prefix`` names it in errors) against ``keys``."""
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: '{prefix}' must be a table ({what}), got {value!r}")
    out = {}
    for k, v in value.items():
        spec = keys.get(k)
        if spec is None:
            raise ConfigError(
                f"{source}: unknown key '{prefix}.{k}' = {v!r} (known: {', '.join(sorted(keys))})"
            )
        out[k] = check_value(source, f"{prefix}.{k}", spec, v)
    return out


def named_tables(
    name: str,
    cls: type,
    keys: dict[str, Key],
    example: str,
    name_error: Callable[[str], str | None] | None = None,
) -> Callable[[str, Any], dict[str, Any]]:
    """The parser of ``[name."<entry>"]`` tables: entry name -> ``cls`` of its checked keys
    (``name_error``: why an entry's name is refused, or None)."""

    def parse(source: str, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ConfigError(
                f"{source}: '{name}' must be tables like [{name}.{example}], got {value!r}"
            )
        for entry in value:
            why = name_error(entry) if name_error else None
            if why is not None:
                raise ConfigError(f"{source}: table [{name}.{entry!r}]: {why}")
        return {
            entry: cls(**check_table(source, f'{name}."{entry}"', keys, v, f'[{name}."{entry}"]'))
            for entry, v in value.items()
        }

    return parse


def named_entries(
    name: str, cls: Any, keys: dict[str, Key]
) -> Callable[[str, Any], tuple[Any, ...]]:
    """The parser of ``[[name]]`` entries: each checked, the required keys present, their
    ``name`` keys unique; a tuple of ``cls``."""
    required = required_of(cls)

    def parse(source: str, value: Any) -> tuple[Any, ...]:
        if not isinstance(value, list):
            raise ConfigError(
                f"{source}: '{name}' must be an array of tables ([[{name}]]), got {value!r}"
            )
        out: list[Any] = []
        for i, entry in enumerate(value):
            prefix = f"{name}[{i}]"
            try:
                checked = check_table(source, prefix, keys, entry, f"[[{name}]]")
            except ConfigError as exc:
                named = entry.get("name") if isinstance(entry, dict) else None
                raise ConfigError(
                    f"{exc} (in the [[{name}]] named {named!r})"
                    if isinstance(named, str)
                    else str(exc)
                ) from None
            for k in required:
                if k not in checked:
                    raise ConfigError(
                        f"{source}: key '{prefix}.{k}' is missing: expected {keys[k].expected}"
                    )
            if any(s.name == checked["name"] for s in out):
                raise ConfigError(
                    f"{source}: key '{prefix}.name' = {checked['name']!r}: "
                    f"expected a name no other [[{name}]] entry uses"
                )
            out.append(cls(**checked))
        return tuple(out)

    return parse


def setting(default: Any, spec: Key, doc: str) -> Any:
    """A dataclass field that is a config key: its default, its check and its meaning."""
    meta = {KEY: dataclasses.replace(spec, doc=" ".join(doc.split()))}
    if default is REQUIRED:
        return field(metadata=meta)
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def section(cls: type, doc: str) -> Any:
    """A dataclass field holding the table ``[<field name>]`` whose keys ``cls`` declares."""
    return field(default_factory=cls, metadata={SECTION: cls, DOC: " ".join(doc.split())})


def keys_of(cls: type) -> dict[str, Key]:
    """The keys ``cls`` declares, in declaration order."""
    return {f.name: f.metadata[KEY] for f in dataclasses.fields(cls) if KEY in f.metadata}


def sections_of(cls: type) -> dict[str, tuple[type, str]]:
    """The tables of ``cls``: name -> (its dataclass, its description)."""
    return {
        f.name: (f.metadata[SECTION], f.metadata[DOC])
        for f in dataclasses.fields(cls)
        if SECTION in f.metadata
    }


def required_of(cls: type) -> tuple[str, ...]:
    """The keys of ``cls`` that have no default."""
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if KEY in f.metadata
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    )
