"""Which database a ``database`` setting names: a file path, or a URL naming the engine.

    jobq.db, /var/lib/jobq/jobq.db      a SQLite file (relative: to the config file's folder)
    sqlite:///var/lib/jobq/jobq.db      a SQLite file, absolute path (three slashes)
    sqlite:relative/jobq.db             a SQLite file, relative path
    postgresql://user@host/db           PostgreSQL (the engine is not built yet: a clear error)

Parsing only: no engine is imported here (that is :mod:`shared.engines`' job).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+\Z")
ENGINES = ("sqlite", "postgresql")
_SCHEMES = {"sqlite": "sqlite", "postgresql": "postgresql", "postgres": "postgresql"}
EXPECTED = ("a SQLite file path, sqlite:///absolute/path.db, sqlite:relative/path.db "
            "or postgresql://...")


@dataclass(frozen=True)
class Target:
    """``engine`` ('sqlite' or 'postgresql') and ``location`` (a file path or the URL)."""
    engine: str
    location: str


def parse(value: str) -> Target:
    """Split a ``database`` value. Raises ValueError (naming the value) for an unknown scheme
    or an empty path."""
    scheme, sep, rest = value.partition(":")
    if not sep or not _SCHEME.match(scheme):
        return Target("sqlite", value)  # a plain path (also ./a:b.db, or C:\\ with its one letter)
    engine = _SCHEMES.get(scheme.lower().split("+")[0])
    if engine is None:
        raise ValueError(f"database {value!r}: unknown engine {scheme!r} (expected {EXPECTED})")
    if engine == "postgresql":
        return Target("postgresql", value)
    path = rest[2:] if rest.startswith("//") else rest  # sqlite:///abs -> /abs; sqlite:rel -> rel
    if rest.startswith("//") and not path.startswith("/"):
        raise ValueError(f"database {value!r}: a sqlite:// URL needs an absolute path "
                         "(sqlite:///abs/path.db) or use sqlite:relative/path.db")
    if not path:
        raise ValueError(f"database {value!r}: no file path after 'sqlite:' (expected {EXPECTED})")
    return Target("sqlite", path)


def resolve(value: str, base_dir: str | None) -> str:
    """A ``database`` value as stored in a validated config: a SQLite file becomes its absolute
    path (relative to ``base_dir``, when given); other URLs stay as written."""
    target = parse(value)
    if target.engine != "sqlite" or target.location == ":memory:" or base_dir is None:
        return target.location if target.engine == "sqlite" else value
    return str(Path(base_dir, target.location).resolve())


def redacted(value: str) -> str:
    """``value`` with any password in a URL replaced by ``***`` (for logs and messages)."""
    scheme, sep, rest = value.partition("://")
    if not sep or "@" not in rest.split("/")[0]:
        return value
    cred, at, host = rest.partition("@")
    user = cred.split(":")[0]
    return f"{scheme}://{user}{':***' if ':' in cred else ''}@{host}"
