"""The cells of human output and the table that aligns them: durations, sizes, sparklines and
the line that stands for an error, each a pure function from a value to text (used by
:mod:`supervisor.views.render`'s texts, ``jobq top`` and the dashboard's filters, which import
them from there)."""

from __future__ import annotations

from typing import Any, Sequence

from shared.model.errortext import cut, headline

SPARKS = "▁▂▃▄▅▆▇█"
ASCII_SPARKS = " .:-=+*#"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> str:
    """Columns padded to their widest cell; numbers right-aligned, text left-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    numeric = [bool(rows) and all(_is_num(row[i]) for row in rows) for i in range(len(headers))]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths))
        ]
        return (indent + "  ".join(parts)).rstrip()

    return "\n".join([line(list(headers))] + [line(r) for r in cells])


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    return str(v)


def duration(seconds: float | None) -> str:
    """``850ms``, ``12.3s``, ``4m05s``, ``2h03m``, ``3d04h`` ("-" for None)."""
    if seconds is None:
        return "-"
    s = max(float(seconds), 0.0)
    if s < 1:
        ms = s * 1000
        return f"{ms:.1f}ms" if ms < 9.95 else f"{ms:.0f}ms"
    if s < 60:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h}h{m:02d}m"
    d, h = divmod(h, 24)
    return f"{d}d{h:02d}h"


def size(n: float) -> str:
    """Bytes as ``0 B``, ``12.0 KiB``, ``3.4 MiB``, ``1.2 GiB``."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def sparkline(values: Sequence[float | None], ascii_only: bool = False) -> str:
    """One character per value, scaled from 0 to the largest; None (no data) is a space."""
    chars = ASCII_SPARKS if ascii_only else SPARKS
    top = max((v for v in values if v is not None), default=0) or 1
    return "".join(
        " " if v is None else chars[min(int(v / top * (len(chars) - 1) + 0.5), len(chars) - 1)]
        for v in values
    )


def error_line(text: str | None, width: int = 60) -> str:
    """The line that stands for an error (its final exception's type and the first line of its
    message: :func:`shared.model.errortext.headline`), cut to ``width``."""
    return cut(headline(text), width)
