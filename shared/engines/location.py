"""Which database a ``database`` setting names, resolved once into a target; and how a
database location is shown to people (:func:`redacted`, :func:`scrub`).

    jobq.db, /var/lib/jobq/jobq.db      a file of the default engine (relative: to the config
                                        file's folder)
    <scheme>:...                        the engine registered for that scheme
                                        (shared.engines.ENGINES), which reads the rest

:func:`target` is the one function that reads a ``database`` value: it finds the engine by the
value's scheme in the registry and lets that engine say what the value means (the
:class:`~shared.engines.engine.Target`: which engine, what it opens, the file that holds the
database if any, whether it is a server). No engine's modules are imported to do so beyond
its light package (the driver is imported when the database is opened).
"""

from __future__ import annotations

import re

from shared.engines import engine_for, engines
from shared.engines.engine import Target

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+\Z")

__all__ = ["Target", "target", "parse", "resolve", "expected", "redacted", "scrub"]


def expected() -> str:
    """The forms of ``database`` the registered engines take, for error messages."""
    forms = [engine.forms for engine in engines()]
    return " or ".join([", ".join(forms[:-1]), forms[-1]]) if len(forms) > 1 else forms[0]


def target(value: str, base_dir: str | None = None) -> Target:
    """THE reading of a ``database`` value: its engine (by the scheme before the first colon;
    a value without one, also ``./a:b.db`` or a drive letter, is a path of the default engine)
    and what that engine makes of it; a relative file is taken against ``base_dir`` when given.
    Raises ValueError (naming the value, never its password) for a scheme no engine takes or a
    value its engine refuses."""
    scheme, sep, rest = value.partition(":")
    if not sep or not _SCHEME.match(scheme):
        return engine_for(None).locate(value, None, base_dir)
    try:
        engine = engine_for(scheme)
    except KeyError:
        raise ValueError(
            f"database {redacted(value)!r}: unknown engine {scheme!r} (expected {expected()})"
        ) from None
    return engine.locate(value, rest, base_dir)


def parse(value: str) -> Target:
    """``value``'s target as written (a relative file stays relative): :func:`target`."""
    return target(value)


def resolve(value: str, base_dir: str | None) -> str:
    """A ``database`` value as stored in a validated config: its target's location (a file
    made absolute against ``base_dir`` when given; a server URL as written)."""
    return target(value, base_dir).location


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
    if "?" in rest[:at] and "=" in rest[rest.index("?") : at]:
        at = rest.rfind("@", 0, rest.index("?"))  # that @ was in the query (application_name=a@b)
        if at < 0:
            return None, rest
    return rest[:at], rest[at + 1 :]


def _secrets(value: str) -> set[str]:
    """The passwords a database URL holds, as written and percent-decoded."""
    from urllib.parse import unquote

    _, _, rest = value.partition("://")
    cred, _ = _split_auth(rest)
    found = [cred.partition(":")[2]] if cred and ":" in cred else []
    found += [m.group(0)[len(m.group(1)) :] for m in _QUERY_SECRET.finditer(rest)]
    # a driver that misreads a password holding an unencoded / or @ quotes a piece of it
    pieces = [p for f in found for p in re.split(r"[/@?#:]", f)]
    return {s for f in found + pieces for s in (f, unquote(f)) if len(s) >= _MIN_SECRET}
