"""``python -m bench.argcodecs --smoke`` runs end to end and prints its figures as JSON (the
figures are not judged here: the machine running the tests is not quiet)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.proc import REPO, env


def test_the_codec_bench_prints_plain_and_rich_figures():
    out = subprocess.run(
        [sys.executable, "-m", "bench.argcodecs", "--smoke"],
        capture_output=True,
        text=True,
        env=env(),
        cwd=str(REPO),
        timeout=240,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(figures["us"]["head"]) == {"enqueue_side", "worker_side", "whole_job", "both_sides"}
    assert {"UUID", "Decimal", "dataclass (3 fields)"} <= set(figures["rich_extra_us"])
