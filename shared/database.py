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
        raise ValueError(f"database {redacted(value)!r}: unknown engine {scheme!r} (expected {EXPECTED})")
    if engine == "postgresql":
        return Target("postgresql", value)
    path = rest[2:] if rest.startswith("//") else rest  # sqlite:///abs -> /abs; sqlite:rel -> rel
    if rest.startswith("//") and not path.startswith("/"):
        raise ValueError(f"database {redacted(value)!r}: a sqlite:// URL needs an absolute path "
                         "(sqlite:///abs/path.db) or use sqlite:relative/path.db")
    if not path:
        raise ValueError(f"database {redacted(value)!r}: no file path after 'sqlite:' (expected {EXPECTED})")
    return Target("sqlite", path)


def resolve(value: str, base_dir: str | None) -> str:
    """A ``database`` value as stored in a validated config: a SQLite file becomes its absolute
    path (relative to ``base_dir``, when given); other URLs stay as written."""
    target = parse(value)
    if target.engine != "sqlite" or target.location == ":memory:" or base_dir is None:
        return target.location if target.engine == "sqlite" else value
    return str(Path(base_dir, target.location).resolve())


def redacted(value: str) -> str:
    """THE way a database location is shown to people (logs, pages, error texts, ``status``):
    a SQLite path as it is; a URL with its password replaced by ``***``, in the user part
    (``user:***@host``, also when the password holds an unencoded ``@`` or ``/``) and in
    password parameters of the query string (``?password=***``, ``sslpassword=***``). Other
    parameters (``options=``, ``host=``) are kept as written."""
    scheme, sep, rest = value.partition("://")
    if not sep:
        return value
    cred, host = _split_auth(rest)
    if cred is not None:
        user, colon, _ = cred.partition(":")
        rest = f"{user}{':***' if colon else ''}@{host}"
    return f"{scheme}://{_QUERY_SECRET.sub(lambda m: m.group(1) + '***', rest)}"


def scrub(text: str, value: str) -> str:
    """``text`` (an error message, a log line) with every secret of the database ``value`` hidden:
    the whole URL becomes :func:`redacted`'s form, and the password, as written and
    percent-decoded, becomes ``***`` wherever else it appears (a driver's message may quote it)."""
    shown = redacted(value)
    if shown == value:
        return text
    text = text.replace(value, shown)
    for secret in sorted(_secrets(value), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


# a password parameter in a URL's query string: its value up to the next & (or # / the end)
_QUERY_SECRET = re.compile(r"([?&](?:ssl)?password=)[^&#]*", re.IGNORECASE)
_MIN_SECRET = 3  # shorter fragments are not searched for in texts (they would mangle them)


def _split_auth(rest: str) -> tuple[str | None, str]:
    """``(user[:password], host...)`` of a URL after ``://``; ``(None, rest)`` with no user part.
    The user part ends at the LAST ``@`` before the query string: a password may hold an
    unencoded ``@`` or ``/`` (hiding too much is safe, showing a fragment is not)."""
    at = rest.rfind("@")
    if at < 0:
        return None, rest
    if "?" in rest[:at] and "=" in rest[rest.index("?"):at]:
        at = rest.rfind("@", 0, rest.index("?"))  # that @ was in the query (application_name=a@b)
        if at < 0:
            return None, rest
    return rest[:at], rest[at + 1:]


def _secrets(value: str) -> set[str]:
    """The passwords a database URL holds, as written and percent-decoded."""
    from urllib.parse import unquote
    _, _, rest = value.partition("://")
    cred, _ = _split_auth(rest)
    found = [cred.partition(":")[2]] if cred and ":" in cred else []
    found += [m.group(0)[len(m.group(1)):] for m in _QUERY_SECRET.finditer(rest)]
    # a driver that misreads a password holding an unencoded / or @ quotes a piece of it
    pieces = [p for f in found for p in re.split(r"[/@?#:]", f)]
    return {s for f in found + pieces for s in (f, unquote(f)) if len(s) >= _MIN_SECRET}
