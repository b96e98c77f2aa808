"""Structured logging: every line carries an event name and its fields.

    log = get_logger("worker")
    event(log, "job.completed", id=job.id, type=job.type, attempt=1, duration=0.012)

Text: ``2026-11-30T14:01:29.123Z INFO job.completed id=... type=... attempt=1 duration=0.012``
JSON (``log_format = "json"``): one object per line with ``ts``, ``level``, ``event`` and the fields.
A ``traceback`` field is the exception: in the text format its lines follow the event's line.
While an OpenTelemetry span is active (shared.telemetry.tracing), each line also carries
``trace_id`` and ``span_id``.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

from shared.runtime.clock import iso
from shared.telemetry.tracing import ids as trace_ids

ROOT = "jobq"


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"{ROOT}.{name}")


def event(logger: logging.Logger, name: str, level: int = logging.INFO, **fields: Any) -> None:
    """Log event ``name`` with ``fields``; cheap when the level is disabled."""
    if logger.isEnabledFor(level):
        logger.log(level, name, extra={"jobq_fields": fields})


def events(logger: logging.Logger, name: str, level: int, rows: list[dict[str, Any]]) -> None:
    """Log event ``name`` once per entry of ``rows`` (each a dict of fields) as ONE record, which
    jobq's formatters write as one line per entry: a worker's batch of completions costs one
    record and one write instead of one each. Build ``rows`` only if the level is enabled."""
    if rows and logger.isEnabledFor(level):
        logger.log(level, name, extra={"jobq_rows": rows})


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return getattr(record, "jobq_fields", {})


def _rows(record: logging.LogRecord) -> list[dict[str, Any]]:
    """The field sets of a record: several for one made by :func:`events`, else one; each with
    the active span's ``trace_id`` and ``span_id`` when there is one (unless it names its own:
    a run's outcome, logged after its span ended)."""
    rows = getattr(record, "jobq_rows", None) or [_fields(record)]
    span = trace_ids()
    if span is None:
        return rows
    return [
        fields if "trace_id" in fields else {**fields, "trace_id": span[0], "span_id": span[1]}
        for fields in rows
    ]


def _text_value(v: Any) -> str:
    s = (
        v
        if isinstance(v, str)
        else (f"{v:.4f}".rstrip("0").rstrip(".") if isinstance(v, float) else str(v))
    )
    return json.dumps(s) if (" " in s or "\n" in s or '"' in s or s == "") else s


TRACEBACK = "traceback"  # a field the text format writes after its line, as lines of their own


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        head = f"{iso(record.created)} {record.levelname} {record.getMessage()}"
        line = "\n".join(_text_line(head, fields) for fields in _rows(record))
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _text_line(head: str, fields: dict[str, Any]) -> str:
    """``head k=v ...``; a ``traceback`` field follows on lines of its own, readable as Python prints it."""
    line = " ".join(
        [
            head,
            *(
                f"{k}={_text_value(v)}"
                for k, v in fields.items()
                if v is not None and k != TRACEBACK
            ),
        ]
    )
    tb = fields.get(TRACEBACK)
    return f"{line}\n{str(tb).rstrip()}" if tb else line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        base: dict[str, Any] = {
            "ts": iso(record.created),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            "logger": record.name,
        }
        lines = []
        for fields in _rows(record):
            obj = {**base, **{k: v for k, v in fields.items() if v is not None}}
            if record.exc_info:
                obj["exc"] = self.formatException(record.exc_info)
            lines.append(json.dumps(obj, default=str, ensure_ascii=False))
        return "\n".join(lines)


def setup(level: str = "info", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Send jobq's logs to ``stream`` (stderr) in the given format; replaces earlier setup."""
    root = logging.getLogger(ROOT)
    for h in list(root.handlers):
        root.removeHandler(h)
    h = logging.StreamHandler(stream or sys.stderr)
    h.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(h)
    root.setLevel(level.upper())
    root.propagate = False
