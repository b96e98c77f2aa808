"""Writing a file atomically: readers see the old text or the new, never a half-written file;
reading a text file as written (its line ends and byte-order mark kept apart) to write it back."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

BOM = "\ufeff"  # a UTF-8 byte-order mark, as some Windows editors start a file with


def read_as_written(path: str | os.PathLike[str]) -> tuple[str, str, str]:
    """``(text, bom, eol)`` of the UTF-8 file ``path``: its text with the line ends as written
    (no translation) and without a leading byte-order mark, that mark (``BOM`` or ""), and its
    line end (that of its first line: "\\r\\n" or "\\n"), so that an edit can write
    ``bom + text`` back in the file's own form. Raises OSError, UnicodeDecodeError."""
    text = Path(path).read_bytes().decode("utf-8")
    bom = BOM if text.startswith(BOM) else ""
    text = text[len(bom) :]
    first = text.find("\n")
    return text, bom, "\r\n" if first > 0 and text[first - 1] == "\r" else "\n"


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` beside ``path``, then rename it over ``path``; its line ends as they are.

    The file keeps its permissions (a new one gets 0644); the temporary file is removed if
    anything fails, and ``path`` is then unchanged.
    """
    path = Path(path)
    folder = path.resolve().parent
    mode = os.stat(path).st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
