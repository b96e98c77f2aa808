"""The native column types read back as the text jobq's code has always seen (registered on
jobq's own connections, or on one cursor of an application's connection, never globally):

- ``timestamptz``: ISO-8601 UTC with milliseconds, exactly as ``shared.runtime.clock.iso``
  writes it (``2026-11-30T14:01:29.123Z``), whatever the session's ``TimeZone`` or
  ``DateStyle`` (a finer time is cut to the millisecond, as ``db_now()`` cuts);
- ``jsonb``: the JSON text as the server prints it (the same values; key order and spacing
  are the server's).

Parameters need nothing: psycopg sends a Python ``str`` untyped, so the server reads ISO text
as a ``timestamptz`` and JSON text as ``jsonb`` where the context says so.
"""

from __future__ import annotations

import re
from datetime import date, timezone
from typing import Any

from psycopg.adapt import AdaptersMap, Loader
from psycopg.types.datetime import TimestamptzLoader
from psycopg.types.string import TextLoader

from shared.runtime.clock import iso


# The server's ISO output (DateStyle ISO) in any zone: date, time, fraction, offset
# (+hh[:mm[:ss]]: historical zones have seconds), era
_ISO_OUT = re.compile(
    r"(\d{4,5})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?"
    r"([+-])(\d\d)(?::(\d\d))?(?::(\d\d))?( BC)?"
)
_UNIX_DAY = 719163  # datetime.date(1970, 1, 1).toordinal()


class IsoTimeLoader(Loader):
    """``timestamptz`` text -> jobq's ISO text. The server's ISO output in UTC
    (``2026-11-30 14:01:29.12+00``) is rearranged as is; another zone's is moved to UTC (by
    arithmetic: a local date may lie past year 9999 while its UTC time does not); any other
    form (another ``DateStyle``) goes through psycopg's own parsing.

    A loader serves one statement's results (psycopg makes new ones for each query), whose rows
    repeat times: a claimed batch shares its claim time, lease and update time, and often its
    enqueue times. Each distinct text is converted once (at most :attr:`MEMO` kept), which took
    the drain's five times per claimed job from about 1.2 to 0.6 us each in the worker."""

    MEMO = 1024

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._memo: dict[bytes, str] = {}

    def load(self, data: Any) -> str:
        raw = bytes(data)
        text = self._memo.get(raw)
        if text is None:
            if len(self._memo) >= self.MEMO:
                self._memo.clear()
            text = self._memo[raw] = self._convert(raw)
        return text

    def _convert(self, raw: bytes) -> str:
        """One server text (``raw``) as jobq's ISO text."""
        text = raw.decode()
        if text[-3:] == "+00" and len(text) <= 26 and text[10:11] == " ":
            if len(text) == 22:
                return text[:10] + "T" + text[11:19] + ".000Z"
            if text[19] == ".":
                return text[:10] + "T" + text[11:19] + (text[19:-3] + "00")[:4] + "Z"
        m = _ISO_OUT.fullmatch(text)
        if m is not None:
            return iso(_unix_millis(m) / 1000)
        at = TimestamptzLoader(self.oid, self.connection).load(raw).astimezone(timezone.utc)
        return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def _unix_millis(m: re.Match[str]) -> int:
    """Milliseconds since the Unix epoch of a match of :data:`_ISO_OUT` (cut to the ms)."""
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac, sign, oh, om, os_, bc = m.groups()[6:]
    y = 1 - y if bc else y  # 1 BC is year 0
    leap = y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
    ref = 2000 if leap else 2001  # a year of the same length, for the day of the year
    yday = date(ref, mo, d).toordinal() - date(ref, 1, 1).toordinal()
    days = (y - 1) * 365 + (y - 1) // 4 - (y - 1) // 100 + (y - 1) // 400 + 1 + yday
    offset = int(oh) * 3600 + int(om or 0) * 60 + int(os_ or 0)
    secs = (days - _UNIX_DAY) * 86400 + h * 3600 + mi * 60 + s
    secs -= offset if sign == "+" else -offset
    return secs * 1000 + int((frac or "0").ljust(3, "0")[:3])


class HexIdLoader(Loader):
    """``uuid`` text (``8-4-4-4-12``) -> jobq's 32-hex id."""

    def load(self, data: Any) -> str:
        return bytes(data).replace(b"-", b"").decode()


def register_native(adapters: AdaptersMap) -> None:
    """Read the native types as jobq's text on ``adapters`` (a connection's or a cursor's)."""
    adapters.register_loader("timestamptz", IsoTimeLoader)
    adapters.register_loader("jsonb", TextLoader)
    adapters.register_loader("uuid", HexIdLoader)
