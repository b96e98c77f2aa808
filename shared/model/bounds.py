"""The limits jobq puts on what it accepts, so that whatever is written every reader can read
(docs/limits.md, "Hostile input").

- JSON (payloads, results): at most ``MAX_DEPTH`` levels of nested arrays/objects. Python's json
  recurses once per level; far below the interpreter's recursion limit every reader (worker,
  supervisor, ``jobq show``) decodes what was accepted, wherever its stack stands.
- Text that is not valid Unicode (lone surrogates, e.g. a file name decoded with
  ``surrogateescape``): JSON keeps it losslessly as ``\\udcxx`` escapes; free text (error
  messages, tracebacks) is stored with ``backslashreplace``.
- Job type names: 1 to ``MAX_TYPE_LEN`` characters, no control characters, valid Unicode.
- Times: every stored time (``run_at``, a delay, ``RetryAfter``) lies in the years 1 to 9999
  (``MIN_TIME`` .. ``MAX_TIME``): stored times are fixed-width text, ordered as text.
"""

from __future__ import annotations

import math
import re

MAX_DEPTH = 100
MAX_TYPE_LEN = 200
MIN_TIME = -62_135_596_800.0  # 0001-01-01T00:00:00Z
MAX_TIME = 253_402_300_799.0  # 9999-12-31T23:59:59Z
MAX_TIME_TEXT = "9999-12-31T23:59:59Z"

# Strings (brackets inside them do not count) and everything else but brackets, for too_deep
_NOT_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[^\[\]{}"]+')
_SAME_BRACKETS = str.maketrans("{}", "[]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Does the JSON ``text`` nest arrays/objects deeper than ``limit``? (Brackets inside
    strings do not count.) Cheap for most texts: fewer brackets than the limit cannot nest
    deeper."""
    if text.count("[") + text.count("{") <= limit:
        return False
    nesting = _NOT_NESTING.sub("", text).translate(_SAME_BRACKETS)  # e.g. "[[][[]]]"
    for _ in range(limit):  # each pass removes the innermost level (str.replace does not rescan)
        if not nesting:
            return False
        nesting = nesting.replace("[]", "")
    return bool(nesting)


def is_unicode(text: str) -> bool:
    """Can ``text`` be stored as UTF-8 (no lone surrogates)?"""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def safe_text(text: str) -> str:
    """``text`` unchanged if it is valid Unicode, else with each lone surrogate written as a
    backslash escape (``\\udc80``), so that it can be stored and printed."""
    if is_unicode(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def type_name_error(jtype: object) -> str | None:
    """Why ``jtype`` is not an acceptable job type name (None if it is)."""
    if not isinstance(jtype, str) or not jtype.strip():
        return f"job type must be a non-empty string, got {jtype!r}"
    if len(jtype) > MAX_TYPE_LEN:
        return f"job type is {len(jtype)} characters long, above the limit of {MAX_TYPE_LEN}: {jtype[:40]!r}..."
    bad = _CONTROL.search(jtype)
    if bad:
        return f"job type {jtype!r} contains the control character {bad.group()!r}"
    if not is_unicode(jtype):
        return f"job type {safe_text(jtype)!r} is not valid Unicode (a lone surrogate)"
    return None


def time_error(ts: float) -> str | None:
    """Why the Unix time ``ts`` cannot be stored (None if it can)."""
    if not isinstance(ts, (int, float)) or isinstance(ts, bool):
        return f"a time must be a number, got {ts!r}"
    if not math.isfinite(ts) or not MIN_TIME <= ts <= MAX_TIME:
        return f"time {ts!r} is outside the years 1 to 9999 (the latest is {MAX_TIME_TEXT})"
    return None
