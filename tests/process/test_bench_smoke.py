"""The benchmark harness runs end to end in its smallest mode and writes the JSON it promises.

Benchmarks are not tests: nothing here looks at how fast anything was.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


def test_bench_smoke_writes_expected_json(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--only",
            "enqueue",
            "--json",
            str(out),
            "--tmp",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
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
    assert not [
        p for p in tmp_path.iterdir() if p.name.startswith("jobq-bench-")
    ]  # temp folders removed


# Run `python -m bench` as if only the test extra were installed: the bench extra's packages
# (psycopg, Procrastinate, Huey) cannot be imported in the bench process.
WITHOUT_BENCH_EXTRA = (
    "import runpy, sys\n"
    "for name in ('psycopg', 'procrastinate', 'huey'):\n"
    "    sys.modules[name] = None  # import raises ImportError\n"
    "sys.argv[0] = 'bench'\n"
    "runpy.run_module('bench', run_name='__main__', alter_sys=True)\n"
)


def test_bench_smoke_on_sqlite_needs_only_the_test_extra(tmp_path: Path) -> None:
    """`python -m bench` imported psycopg even for SQLite. The PostgreSQL modules are
    imported only for a --database run; Huey, when missing, is skipped with a note."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_BENCH_EXTRA,
            "--smoke",
            "--only",
            "enqueue",
            "--json",
            str(out),
            "--tmp",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "huey is not installed" in proc.stderr
    data = json.loads(out.read_text())
    assert data["meta"]["huey"] is None and set(data["results"]["enqueue"]) == {"jobq", "raw"}


def require_bench_extra() -> None:
    """The PostgreSQL bench compares jobq with Huey and Procrastinate: it needs the bench extra.
    Without it the test skips saying so (fails under JOBQ_REQUIRE_POSTGRES=1, as a missing server does)."""
    missing = [m for m in ("huey", "procrastinate") if importlib.util.find_spec(m) is None]
    if not missing:
        return
    why = f"the PostgreSQL bench needs the bench extra ({', '.join(missing)} missing): pip install -e '.[bench]'"
    if os.environ.get("JOBQ_REQUIRE_POSTGRES") == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture
def own_database() -> Iterator[str]:
    """The URL of a database made for this test and dropped after it: the schemas a bench run
    leaves behind are counted there, where no other run on the same server (another checkout's
    tests) makes and drops its own meanwhile. Skips without a server unless JOBQ_REQUIRE_POSTGRES=1."""
    import uuid
    from urllib.parse import urlsplit

    import psycopg
    from tests.engines import postgres_url, require_postgres

    require_postgres()
    base = postgres_url()
    name = f"bench_smoke_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        u = urlsplit(
            base
        )  # geturl() would drop the "//" of an empty host ("postgresql:///test?host=...")
        yield f"{u.scheme}://{u.netloc}/{name}" + (f"?{u.query}" if u.query else "")
    finally:
        with psycopg.connect(base, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _bench_schemas(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        return {
            r[0]
            for r in c.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench\\_%'")
        }


def test_bench_postgres_smoke_writes_expected_json(tmp_path: Path, own_database: str) -> None:
    """``python -m bench --database postgresql://...`` runs every system and workload at tiny
    sizes, reports them, and leaves no schema behind (skips without a server unless
    JOBQ_REQUIRE_POSTGRES=1)."""
    require_bench_extra()
    url = own_database
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--database",
            url,
            "--only",
            "enqueue,burn,idle,depth",
            "--json",
            str(out),
            "--tmp",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    data = json.loads(out.read_text())
    assert {"synchronous_commit", "server_version"} <= set(data["meta"]["postgres"])
    r = data["results"]
    for system in ("jobq", "raw", "huey", "procrastinate"):
        figure = r["enqueue"][system]["pg"]
        assert {"single", "batched"} <= set(figure), figure
        assert figure["single"]["per_s"] and figure["batched"]["per_s"], figure
    w = str(data["meta"]["scale"]["workers"][-1])
    burns = [
        r["burn"]["jobq"]["pg"],
        r["burn"]["huey"]["pg"],
        *r["burn"]["procrastinate"].values(),
        *r["burn"]["raw"].values(),
    ]
    assert len(burns) == 7  # jobq, Huey, Procrastinate 1xW and Wx1, raw 1, 10, 100
    for b in burns:
        assert b[w]["per_s"], b
    for system, variant in (
        ("jobq", "pg"),
        ("huey", "pg"),
        ("procrastinate", "1xW"),
        ("raw", "pg"),
    ):
        idle = r["idle"][system][variant]
        assert idle["start"]["missing"] == 0 and idle["delayed"]["missing"] == 0, idle
        assert idle["cpu_pct"] >= 0, idle
    for system in ("jobq", "raw"):
        assert r["depth"][system]["pg"]["1000"]["due"]["claim_ms"] > 0
    assert data["table"].startswith("| figure | jobq | Huey PG |")
    assert "PostgreSQL targets" in proc.stdout
    assert _bench_schemas(url) == set()  # every schema it made is dropped
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("jobq-bench-")]


def test_chaos_postgres_smoke(tmp_path: Path, own_database: str) -> None:
    """``python -m bench.chaos --database postgresql://...`` at a tiny size: its oracle reads the
    jobs from the server; nothing lost, nothing overlapping."""
    url = own_database
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.chaos",
            "--database",
            url,
            "--jobs",
            "40",
            "--workers",
            "2",
            "--kill-every",
            "0.3",
            "--supervisor-kills",
            "1",
            "--timeout",
            "120",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "chaos: jobs=40 completed=40" in proc.stdout and " lost=0 overlapping=0 " in proc.stdout
    assert _bench_schemas(url) == set()


def test_bench_otel_smoke_states_the_tracing_target(tmp_path: Path) -> None:
    """The ``otel`` workload (burn-downs with tracing off, the API alone and the SDK
    with a no-op exporter, and the per-job micro-benchmarks) runs and its target is stated."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--only",
            "otel",
            "--json",
            str(out),
            "--tmp",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    otel = json.loads(out.read_text())["results"]["otel"]
    for mode in ("off", "api", "sdk", "sampled"):
        assert {"per_s", "runs", "cpu_us_per_job"} <= set(otel["burn"][mode])
        assert otel["micro"][mode]["run_us"] > 0
    assert otel["micro"]["sdk"]["bare_span_us"] > 0 and {"loss_pct", "cpu_loss_pct"} <= set(
        otel["burn"]["sdk"]
    )
    assert otel["micro"]["sdk"]["metered_run_us"] > 0  # the run path with the SDK's meters too
    assert "ParentBased(TraceIdRatioBased(0.01))): burn-down loses < 3%" in proc.stdout
    assert otel["micro"]["sdk"]["own_us"] is not None and "sampled" in otel["burn"]
    assert (
        "the SDK's bare span alone" in proc.stdout
        and "to the SDK whatever jobq does" in proc.stdout
    )


FEATURE_FIGURES = {
    "enqueue": {"us_per_call", "extra_percent"},
    "wait": {"in_hand_ms", "finish_ms", "added_ms", "end_to_hand_ms"},
    "deps": {"independent", "fanin", "chain"},
    "fair": {"fair", "plain", "vs_plain"},
    "async": {"seconds", "ideal_seconds", "vs_ideal"},
}


def _features_run(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--only",
            "features",
            "--json",
            str(out),
            "--tmp",
            str(tmp_path),
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc, json.loads(out.read_text())


def _check_features(proc: subprocess.CompletedProcess, data: dict, engine: str) -> None:
    f = data["results"]["features"]
    assert f["engine"] == engine
    for name, keys in FEATURE_FIGURES.items():
        assert keys <= set(f[name]), (name, f[name])  # a failed measurement is {"error": ...}
    assert (
        f["wait"]["in_hand_ms"]["missing"] == 0
        and f["deps"]["fanin"]["jobs"] == f["deps"]["independent"]["jobs"]
    )
    assert f["fair"]["fair"]["per_s"] > 0 and f["async"]["ideal_seconds"] > 0
    assert f"Features on {engine}, each beside its plain baseline" in proc.stdout
    verdicts = {v["target"]: v for v in data["targets_performance"]}
    from bench.targets import FEATURES, PERFORMANCE

    for t in PERFORMANCE + FEATURES:  # every target stated, judged or said to be not measured
        assert any(f"] {t.name} {t.bound}" in name for name in verdicts), t.name
    for t in FEATURES:  # measured by this very run
        v = verdicts[f"[{engine}] {t.name} {t.bound}"]
        assert v["met"] in (True, False) and not v["measured"].startswith("not measured"), v
    assert "Performance targets" in proc.stdout


def test_bench_features_smoke_on_sqlite_states_every_target(tmp_path: Path) -> None:
    """The features workload measures each feature beside its baseline, and every
    performance target is printed met, missed or not measured; start-up and purge figures come from
    the JSON given, never from a figure of the code's own."""
    startup = tmp_path / "startup.json"
    startup.write_text(
        json.dumps(
            {
                "cold_template": {
                    "first_job_s": 0.15,
                    "all_workers_first_job_s": 0.45,
                    "end_to_end_jobs_s": 9000,
                },
                "huey_quiet": {"end_to_end_jobs_s": 3000},
                "respawn": {"after_reap_ms": {"median": 40.0}},
            }
        )
    )
    proc, data = _features_run(tmp_path, "--startup-json", str(startup))
    _check_features(proc, data, "sqlite")
    v = {x["target"]: x for x in data["targets_performance"]}
    assert v["[sqlite] launch to first job <= 0.2 s"]["met"] is True
    assert v["[sqlite] launch to 8 busy workers <= 0.3 s"]["met"] is False
    assert (
        "0.45 s (" + str(startup) + ")"
        in v["[sqlite] launch to 8 busy workers <= 0.3 s"]["measured"]
    )
    assert v["[sqlite] burn-down from launch vs Huey fsync=False -q >= 2x"]["met"] is True  # 3.00x
    assert (
        v["[sqlite] burn-down from launch vs Huey's defaults >= 8x"]["met"] is None
    )  # not in the file
    assert v["[both] purge of 500,000 rows on a loaded machine <= 30 s"]["met"] is None
    assert "not measured in this run: [postgresql] idle enqueue-to-start p50 <= 4 ms" in proc.stdout
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("jobq-bench-")]


def test_bench_features_smoke_on_postgres(tmp_path: Path, own_database: str) -> None:
    """The same on PostgreSQL; every schema it made is dropped."""
    url = own_database
    proc, data = _features_run(tmp_path, "--database", url)
    _check_features(proc, data, "postgresql")
    assert _bench_schemas(url) == set()  # every schema it made is dropped


def test_bench_refuses_an_unreadable_target_json_before_running(tmp_path: Path) -> None:
    bad = tmp_path / "purge.json"
    bad.write_text("[1, 2]")
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--only", "features", "--purge-json", str(bad)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (
        proc.returncode == 2 and f"{str(bad)!r} holds a JSON list, not an object" in proc.stderr
    ), proc.stderr
    missing = tmp_path / "nope.json"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--smoke", "--startup-json", str(missing)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and f"cannot read {str(missing)!r}" in proc.stderr, proc.stderr


def test_bench_startup_workload_smoke_judges_the_start_up_targets(tmp_path: Path) -> None:
    """`python -m bench --only startup` runs bench.startup's measurements (cold start, respawn,
    faults) with their own signatures, and the start-up targets are judged on what it measured:
    none of its figures may be an error (they once were all TypeErrors, judged "not measured")."""
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--smoke",
            "--only",
            "startup",
            "--systems",
            "jobq",
            "--json",
            str(out),
            "--tmp",
            str(tmp_path),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    s = data["results"]["startup"]
    for figure in (s["cold"]["template"], s["cold"]["exec"], s["respawn"], s["faults"]["none"]):
        assert "error" not in figure, figure
    assert s["cold"]["template"]["first_job_s"] > 0 and s["respawn"]["after_kill_ms"]["median"] > 0
    judged = {v["target"]: v for v in data["targets_performance"]}
    for name in (
        "[sqlite] launch to first job <= 0.2 s",
        "[sqlite] respawn of a SIGKILLed worker <= 50 ms",
    ):
        assert judged[name]["met"] is not None and "(this run)" in judged[name]["measured"], judged[
            name
        ]
