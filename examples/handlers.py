"""Example handlers: the standard job types used by the README's walkthrough.

- ``report:generate`` ``{reportId, format, filters}``: writes ``reports/<reportId>.<format>``, a
  small report file of that format (a one-page PDF, CSV, JSON or text: :mod:`examples.reportfile`),
  and returns its path.
- ``exploration:run`` ``{sessionId, config}``: runs a tiny deterministic "exploration" (a random
  walk seeded by the session id) and returns a summary.
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

from jobq import PermanentError, handler

from .reportfile import render

REPORT_DIR_ENV = "JOBQ_REPORT_DIR"
FORMATS = ("pdf", "csv", "json", "txt")


@handler("report:generate", max_attempts=5, timeout=120)
def generate_report(payload, job):
    report_id = payload.get("reportId")
    fmt = payload.get("format", "txt")
    if not report_id:
        raise PermanentError("payload needs a reportId")
    if fmt not in FORMATS:
        raise PermanentError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    out_dir = Path(os.environ.get(REPORT_DIR_ENV, "reports"))
    out_dir.mkdir(parents=True, exist_ok=True)
    filters = payload.get("filters") or {}
    body = {
        "reportId": report_id,
        "format": fmt,
        "filters": filters,
        "attempt": job.attempt,
        "job": job.id,
    }
    path = out_dir / f"{report_id}.{fmt}"
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(render(fmt, body))
    os.replace(tmp, path)  # atomic: a re-run overwrites, never half-writes
    job.logger.info("report written to %s", path)
    return {"path": str(path), "bytes": path.stat().st_size}


@handler("exploration:run", timeout=60)
def run_exploration(payload, job):
    session = payload.get("sessionId")
    if not session:
        raise PermanentError("payload needs a sessionId")
    config = payload.get("config") or {}
    steps = int(config.get("steps", 1000))
    seed = int(hashlib.sha256(str(session).encode()).hexdigest()[:16], 16)
    rng = random.Random(seed)
    position = peak = 0
    for _ in range(steps):
        position += rng.choice((-1, 1))
        peak = max(peak, abs(position))
    return {"sessionId": session, "steps": steps, "final": position, "peak": peak}
