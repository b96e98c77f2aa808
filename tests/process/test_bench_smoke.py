"""The benchmark harness runs end to end in its smallest mode and writes the JSON it promises.

Benchmarks are not tests: nothing here looks at how fast anything was.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").exists())


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


# Run `python -m bench` as if only the test extra were installed: the bench extra's packages
# (psycopg, Procrastinate, Huey) cannot be imported in the bench process.
WITHOUT_BENCH_EXTRA = ("import runpy, sys\n"
                       "for name in ('psycopg', 'procrastinate', 'huey'):\n"
                       "    sys.modules[name] = None  # import raises ImportError\n"
                       "sys.argv[0] = 'bench'\n"
                       "runpy.run_module('bench', run_name='__main__', alter_sys=True)\n")


def test_bench_smoke_on_sqlite_needs_only_the_test_extra(tmp_path: Path) -> None:
    """Issue 21: `python -m bench` imported psycopg even for SQLite. The PostgreSQL modules are
    imported only for a --database run; Huey, when missing, is skipped with a note."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-c", WITHOUT_BENCH_EXTRA, "--smoke", "--only", "enqueue", "--json",
                           str(out), "--tmp", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=240)
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


def _bench_schemas(url: str) -> set[str]:
    import psycopg
    with psycopg.connect(url, autocommit=True) as c:
        return {r[0] for r in c.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'bench\\_%'")}


@pytest.fixture
def bench_db():
    """A database of its own on the test server for one bench run (dropped after): the schemas
    left in it are this run's alone. On the shared database, another bench running meanwhile
    (a developer's, another checkout's tests) made and dropped ``bench_*`` schemas of its own."""
    from urllib.parse import urlsplit

    import psycopg

    from tests.engines import postgres_url, require_postgres
    require_postgres()
    server = postgres_url()
    name = f"jobq_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server, autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    try:
        url = urlsplit(server)  # (urlunsplit drops the // of an empty host: postgresql:///test)
        yield f"{url.scheme}://{url.netloc}/{name}" + (f"?{url.query}" if url.query else "")
    finally:
        with psycopg.connect(server, autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_bench_postgres_smoke_writes_expected_json(tmp_path: Path, bench_db: str) -> None:
    """``python -m bench --database postgresql://...`` runs every system and workload at tiny
    sizes, reports them, and leaves no schema behind (skips without a server unless
    JOBQ_REQUIRE_POSTGRES=1)."""
    require_bench_extra()
    url = bench_db
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--database", url, "--only",
                           "enqueue,burn,idle,depth", "--json", str(out), "--tmp", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    data = json.loads(out.read_text())
    assert {"synchronous_commit", "server_version"} <= set(data["meta"]["postgres"])
    r = data["results"]
    for system in ("jobq", "raw", "huey", "procrastinate"):
        figure = r["enqueue"][system]["pg"]
        assert {"single", "batched"} <= set(figure), figure
        assert figure["single"]["per_s"] and figure["batched"]["per_s"], figure
    w = str(data["meta"]["scale"]["workers"][-1])
    burns = [r["burn"]["jobq"]["pg"], r["burn"]["huey"]["pg"], *r["burn"]["procrastinate"].values(),
             *r["burn"]["raw"].values()]
    assert len(burns) == 7  # jobq, Huey, Procrastinate 1xW and Wx1, raw 1, 10, 100
    for b in burns:
        assert b[w]["per_s"], b
    for system, variant in (("jobq", "pg"), ("huey", "pg"), ("procrastinate", "1xW"), ("raw", "pg")):
        idle = r["idle"][system][variant]
        assert idle["start"]["missing"] == 0 and idle["delayed"]["missing"] == 0, idle
        assert idle["cpu_pct"] >= 0, idle
    for system in ("jobq", "raw"):
        assert r["depth"][system]["pg"]["1000"]["due"]["claim_ms"] > 0
    assert data["table"].startswith("| figure | jobq | Huey PG |")
    assert "Issue 14 targets" in proc.stdout
    assert _bench_schemas(url) == set()  # every schema it made is dropped
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("jobq-bench-")]


def test_chaos_postgres_smoke(tmp_path: Path, bench_db: str) -> None:
    """``python -m bench.chaos --database postgresql://...`` at a tiny size: its oracle reads the
    jobs from the server; nothing lost, nothing overlapping."""
    url = bench_db
    proc = subprocess.run([sys.executable, "-m", "bench.chaos", "--database", url, "--jobs", "40", "--workers", "2",
                           "--kill-every", "0.3", "--supervisor-kills", "1", "--timeout", "120"],
                          cwd=REPO, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert "chaos: jobs=40 completed=40" in proc.stdout and " lost=0 overlapping=0 " in proc.stdout
    assert _bench_schemas(url) == set()


def test_bench_otel_smoke_states_the_tracing_target(tmp_path: Path) -> None:
    """Issue 29: the ``otel`` workload (burn-downs with tracing off, the API alone and the SDK
    with a no-op exporter, and the per-job micro-benchmarks) runs and its target is stated."""
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--only", "otel", "--json", str(out),
                           "--tmp", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    otel = json.loads(out.read_text())["results"]["otel"]
    for mode in ("off", "api", "sdk"):
        assert {"per_s", "runs", "cpu_us_per_job"} <= set(otel["burn"][mode])
        assert otel["micro"][mode]["run_us"] > 0
    assert otel["micro"]["sdk"]["bare_span_us"] > 0 and {"loss_pct", "cpu_loss_pct"} <= set(otel["burn"]["sdk"])
    assert "tracing on (the SDK and a no-op exporter): burn-down loses < 3%" in proc.stdout
    assert "the SDK's bare span alone" in proc.stdout
