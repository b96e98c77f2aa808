"""The Prometheus endpoint, served by the supervisor process itself (no threads): scraped over
HTTP while real workers run jobs, and its text parsed strictly."""

from __future__ import annotations

import math
import os
import re
import signal
import socket
import urllib.error
import urllib.request

import psutil

from tests.proc import job_row, wait_until, write_config
from tests.unit.cli.test_cli import jobq, ok

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)')
Series = dict[tuple[str, frozenset], float]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int, path: str = "/metrics") -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def parse(text: str) -> Series:
    """Parse the text format strictly: HELP/TYPE before a family's samples, known kinds, valid
    names, labels and values, no duplicate series, and consistent histograms."""
    kinds: dict[str, str] = {}
    series: Series = {}
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            assert len(line.split(" ", 3)) == 4, line
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram") and name not in kinds, line
            kinds[name] = kind
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.groups()
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name not in kinds else name
        assert family in kinds, f"sample before its # TYPE: {line!r}"
        pairs = LABEL.findall(labels or "")
        assert ",".join(f'{k}="{v}"' for k, v in pairs) == (labels or ""), line
        key = (name, frozenset(pairs))
        assert key not in series, f"duplicate series {line!r}"
        series[key] = float(value)
        assert not math.isnan(series[key])
    for family in (f for f, k in kinds.items() if k == "histogram"):
        check_histograms(series, family)
    return series


def check_histograms(series: Series, family: str) -> None:
    by_type: dict[str, list[tuple[float, float]]] = {}
    for (name, labels), v in series.items():
        if name == f"{family}_bucket":
            d = dict(labels)
            by_type.setdefault(d["type"], []).append((float(d["le"]), v))
    for t, buckets in by_type.items():
        counts = [v for _, v in sorted(buckets)]
        assert counts == sorted(counts), f"{family} {t}: buckets not cumulative"
        assert sorted(buckets)[-1][0] == math.inf
        assert counts[-1] == series[(f"{family}_count", frozenset({("type", t)}))]


def value(series: Series, name: str, **labels: str) -> float | None:
    return series.get((name, frozenset(labels.items())))


def test_prometheus_endpoint_served_by_the_supervisor(tmp_path, sup_factory):
    port = free_port()
    cfg = write_config(tmp_path, handlers=["opsjobs"], metrics_port=port)
    sup = sup_factory(cfg)
    wait_until(lambda: _up(port), what="metrics endpoint listening")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(
        '{"type": "ops:ok"}\n' * 3 + '{"type": "ops:flaky", "payload": {"ok_at": 2}}\n'
        '{"type": "ops:fail"}\n'
    )
    ok(jobq(cfg, "enqueue", "--file", str(jobs)))

    def settled() -> Series | None:
        s = parse(scrape(port)[2])
        done = (
            value(s, "jobq_jobs_processed_total", type="ops:ok") == 3
            and value(s, "jobq_jobs_processed_total", type="ops:flaky") == 2
            and value(s, "jobq_jobs_failed_total", type="ops:fail") == 1
        )
        return s if done else None

    s = wait_until(settled, what="all attempts counted")
    status, ctype, _ = scrape(port)
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    assert value(s, "jobq_jobs", status="completed", type="ops:ok") == 3
    assert value(s, "jobq_jobs", status="failed", type="ops:fail") == 1
    assert value(s, "jobq_jobs_completed_total", type="ops:flaky") == 1
    assert value(s, "jobq_jobs_retried_total", type="ops:flaky") == 1
    assert value(s, "jobq_jobs_retried_total", type="ops:ok") == 0
    assert value(s, "jobq_job_run_seconds_count", type="ops:ok") == 3
    assert value(s, "jobq_job_wait_seconds_count", type="ops:flaky") == 2
    assert value(s, "jobq_workers") == 2 and value(s, "jobq_workers_target") == 2
    assert value(s, "jobq_worker_starts_total") == 2 and value(s, "jobq_worker_restarts_total") == 0
    assert value(s, "jobq_paused") == 0 and value(s, "jobq_oldest_pending_age_seconds") == 0
    assert value(s, "jobq_wal_bytes") >= 0
    assert scrape(port, "/elsewhere")[0] == 404

    # a client that connects and says nothing does not hold up the loop, and no thread serves it
    with socket.create_connection(("127.0.0.1", port)):
        ok(jobq(cfg, "pause"))
        assert value(parse(scrape(port)[2]), "jobq_paused") == 1
        assert psutil.Process(sup.pid).num_threads() == 1
        for worker in sup.workers():  # the listening socket did not cross the fork into the workers
            assert psutil.Process(worker).net_connections("inet") == []
    ok(jobq(cfg, "resume"))

    # a worker killed mid-job: its job is reaped, the worker restarted, all counted
    gate = tmp_path / "gate"
    held = ok(jobq(cfg, "enqueue", "ops:gate", f'{{"gate": "{gate}"}}')).strip()
    victim = wait_until(lambda: job_row(cfg, held)["owner_pid"], what="gate job running")
    os.kill(victim, signal.SIGKILL)
    wait_until(
        lambda: value(parse(scrape(port)[2]), "jobq_worker_restarts_total") == 1,
        what="restart counted",
    )
    s = parse(scrape(port)[2])
    assert value(s, "jobq_jobs_reaped_total") == 1 and value(s, "jobq_worker_crashes_total") == 1
    gate.touch()
    wait_until(lambda: job_row(cfg, held)["status"] == "completed", what="gate job completed")

    # a new port in the file: the running supervisor moves the endpoint there
    new_port = free_port()
    ok(jobq(cfg, "config", "set", "metrics_port", str(new_port)))
    wait_until(lambda: _up(new_port), what="endpoint on the new port")
    assert not _up(port)


def _up(port: int) -> bool:
    try:
        return scrape(port)[0] == 200
    except OSError:
        return False


def test_clients_that_never_read_a_big_exposition_do_not_stall_the_supervisor(
    tmp_path, sup_factory
):
    """Fifteen thousand job types with long names make the exposition a few
    megabytes, more than a socket's buffers take; a dozen clients send a GET and never read.
    A worker SIGKILLed meanwhile has its job taken back at once (the answers used to be written
    with a blocking sendall, up to 1 s per client), and the endpoint keeps answering."""
    from shared import JobQueue

    port = free_port()
    cfg = write_config(tmp_path, handlers=["opsjobs"], metrics_port=port)
    long = "x" * 190  # the longest a type may be, with "big:" and the number
    with JobQueue(str(tmp_path / "q.db")) as q:  # scheduled for later: counted, never run
        q.enqueue_many([(f"big:{long}-{n:05d}", None, {"delay": 3600}) for n in range(15_000)])
    sup = sup_factory(cfg)
    wait_until(lambda: _up(port), what="metrics endpoint listening")
    assert len(scrape(port)[2]) > 6_000_000
    gate = tmp_path / "gate"
    held = ok(jobq(cfg, "enqueue", "ops:gate", f'{{"gate": "{gate}"}}')).strip()
    victim = wait_until(lambda: job_row(cfg, held)["owner_pid"], what="gate job running")
    mute = []
    try:
        for _ in range(12):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: jobq\r\n\r\n")
            mute.append(s)
        os.kill(victim, signal.SIGKILL)
        wait_until(
            lambda: job_row(cfg, held)["owner_pid"] != victim,
            timeout=5,
            what="the killed worker's job taken back",
        )
        status, _, text = scrape(port)
        assert status == 200 and f'type="big:{long}-14999"' in text
    finally:
        for s in mute:
            s.close()
    gate.touch()
    wait_until(lambda: job_row(cfg, held)["status"] == "completed", what="gate job completed")
