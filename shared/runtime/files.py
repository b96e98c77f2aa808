"""Writing a file atomically: readers see the old text or the new, never a half-written file."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` beside ``path``, then rename it over ``path``.

    The file keeps its permissions (a new one gets 0644); the temporary file is removed if
    anything fails, and ``path`` is then unchanged.
    """
    path = Path(path)
    folder = path.resolve().parent
    mode = os.stat(path).st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
