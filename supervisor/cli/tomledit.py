"""Set one key in a TOML file's text, keeping everything else as the operator wrote it.

``set_key(text, section, key, value)`` rewrites only the value of that key's line (a trailing
comment stays), or inserts a ``key = value`` line after the last key of its table, or appends the
table. The caller re-parses the result: :func:`set_key` itself checks that the new text parses to
exactly the old data with that one key changed, and raises :class:`EditError` otherwise (an
unusual layout: dotted keys, inline tables), so a file is never written wrong.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import tomli_w

_HEADER = re.compile(r"^\s*\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^(\s*)("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)(\s*=\s*)(.*)$""", re.S)
MAX_VALUE_LINES = 1000


class EditError(ValueError):
    """The key could not be set in place; the message says why."""


def toml_value(value: Any) -> str:
    """``value`` as TOML on one line (arrays too)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return tomli_w.dumps({"v": value})[len("v = ") :].rstrip("\n")


def parse_value(text: str) -> Any:
    """A command-line VALUE: TOML (``3``, ``2.5``, ``true``, ``"x"``, ``["a"]``), else the text
    itself as a string (so ``log_format json`` needs no quotes)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def set_key(text: str, section: str, key: str, value: Any, eol: str = "\n") -> str:
    """``text`` with ``key`` of table ``section`` ("" for top level) set to ``value``; the
    lines it adds end with ``eol`` (the file's own line end)."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise EditError(f"the file is not valid TOML: {exc}") from None
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += eol
    rendered = toml_value(value)
    bounds = _table_bounds(lines, section)
    if bounds is None:
        new = lines + [eol, f"[{section}]{eol}", f"{key} = {rendered}{eol}"]
    else:
        new = _replace_or_insert(lines, bounds, key, rendered, eol)
    out = "".join(new)
    expected = _with(before, section, key, value)
    try:
        after = tomllib.loads(out)
    except tomllib.TOMLDecodeError as exc:
        raise EditError(
            f"editing '{key}' in place would break the file ({exc}); edit it by hand"
        ) from None
    if after != expected:
        raise EditError(
            f"could not edit '{key}' in place (an unusual layout: dotted keys or an inline "
            f"table?); edit the file by hand"
        )
    return out


def _with(data: dict[str, Any], section: str, key: str, value: Any) -> dict[str, Any]:
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    target = out.setdefault(section, {}) if section else out
    target[key] = list(value) if isinstance(value, tuple) else value
    return out


def _table_bounds(lines: list[str], section: str) -> tuple[int, int] | None:
    """[start, end) of the lines that belong to table ``section`` (after its header)."""
    start = 0 if section == "" else None
    for i, line in enumerate(lines):
        m = _HEADER.match(line)
        if not m or _continues_value(lines, i):
            continue
        if start is not None:
            return start, i
        if not line.lstrip().startswith("[[") and _unquote(m.group(1)) == section:
            start = i + 1
    return None if start is None else (start, len(lines))


def _continues_value(lines: list[str], i: int) -> bool:
    """Is line ``i`` inside a multi-line value (an array or string) begun above it?"""
    text = "".join(lines[:i])
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return True
    return False


def _replace_or_insert(
    lines: list[str], bounds: tuple[int, int], key: str, rendered: str, eol: str
) -> list[str]:
    start, end = bounds
    last_key_end = None
    i = start
    while i < end:
        m = _KEY.match(lines[i])
        if m is None:
            i += 1
            continue
        j, value_text, comment = _value_extent(lines, i, m.group(4))
        if _unquote(m.group(2)) == key:
            gap = value_text[len(value_text.rstrip()) :] if comment.strip() else ""
            newline = "\r\n" if lines[j].endswith("\r\n") else "\n"
            tail = comment.rstrip("\r\n") + newline if comment.strip() else newline
            line = f"{m.group(1)}{m.group(2)}{m.group(3)}{rendered}{gap}{tail}"
            return lines[:i] + [line] + lines[j + 1 :]
        last_key_end = j
        i = j + 1
    at = start if last_key_end is None else last_key_end + 1
    if last_key_end is None and start == 0:
        at = end  # a top-level key in a file with no top-level keys: just before the first table
    return lines[:at] + [f"{key} = {rendered}{eol}"] + lines[at:]


def _value_extent(lines: list[str], i: int, rest: str) -> tuple[int, str, str]:
    """(last line index, value text, trailing comment) of the value starting with ``rest``."""
    chunk = rest
    for j in range(i, min(i + MAX_VALUE_LINES, len(lines))):
        if j > i:
            chunk += lines[j]
        for cut in [m.start() for m in re.finditer("#", chunk)] + [len(chunk)]:
            if _parses(chunk[:cut]):
                return j, chunk[:cut], chunk[cut:]
    return i, rest, ""


def _parses(value_text: str) -> bool:
    if not value_text.strip():
        return False
    try:
        tomllib.loads("v = " + value_text)
    except tomllib.TOMLDecodeError:
        return False
    return True


def _unquote(name: str) -> str:
    name = name.strip()
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'":
        return name[1:-1]
    return name
