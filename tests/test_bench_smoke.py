"""The benchmark harness runs end to end in its smallest mode and writes the JSON it promises.

Benchmarks are not tests: nothing here looks at how fast anything was.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_bench_smoke_writes_expected_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--only", "enqueue", "--json", str(out),
                           "--tmp", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert {"meta", "results", "table", "targets"} <= set(data)
    assert {"commit", "python", "sqlite", "scale", "seconds"} <= set(data["meta"])
    enqueue = data["results"]["enqueue"]
    for system in ("jobq", "raw"):
        for sync in ("normal", "full"):
            for kind in ("single", "batched"):
                figure = enqueue[system][sync][kind]
                assert {"count", "seconds", "per_s"} <= set(figure), figure
    if data["meta"]["huey"]:
        assert {"default", "off"} <= set(enqueue["huey"])
    assert data["table"].startswith("| figure | jobq |")
    assert "enqueue single" in proc.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("jobq-bench-")]  # temp folders removed
