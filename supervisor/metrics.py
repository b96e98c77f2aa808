"""Prometheus metrics, served by the supervisor process itself, without threads.

When ``metrics_port`` is set, :class:`MetricsServer` keeps a non-blocking listening socket whose
fd (and those of connected clients) the arbiter's wait selects on; :meth:`MetricsServer.serve`
then accepts, reads and answers inside the arbiter loop. A request is answered once its headers
are in; a client that sends nothing for ``CLIENT_TIMEOUT`` is dropped, and at most
``MAX_CLIENTS`` are held, so a slow or hostile client cannot stall the loop. Sockets are not
inheritable: nothing crosses the fork of a worker.

What is exported (``text/plain; version=0.0.4``):
- gauges read from the database at each scrape: jobs by status and type, scheduled jobs, the
  oldest due job's age, paused, WAL size, live and wanted workers;
- counters since this supervisor started its metrics: attempts ended (processed), completed,
  failed, retried, per type, and wait / run-time histograms, folded from ``job_attempts``;
- the supervisor's own counters: worker starts, restarts, crashes, jobs reaped.
"""
from __future__ import annotations

import logging
import socket
import time
from typing import Any, Callable, Iterable

from shared import admin
from shared.clock import parse_iso
from shared.config import Config
from shared.logs import event, get_logger
from shared.contract import OpsStore

from .stats import BOUNDS, AttemptFeed, Histogram

log = get_logger("supervisor")

MAX_CLIENTS = 16
MAX_REQUEST = 16 * 1024
CLIENT_TIMEOUT = 5.0
FOLD_EVERY = 5.0      # seconds between folds of the attempt feed when nobody scrapes
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

DOCS = {
    "processed": "Job attempts that ended (any outcome), by type.",
    "completed": "Job attempts that completed, by type.",
    "failed": "Jobs that failed for good, by type.",
    "retried": "Job attempts that ended in a retry (pending again, the attempt counted), by type.",
    "workers": "Live worker processes of this supervisor.",
    "workers_target": "Worker processes this supervisor wants (config, --workers, scale).",
    "worker_starts": "Workers started in a slot for the first time.",
    "worker_restarts": "Workers started to replace one that exited (crash, recycle, timeout kill).",
    "worker_crashes": "Workers that exited abnormally without being told to.",
    "jobs_reaped": "Running jobs taken back from dead or killed workers (re-queued or failed).",
}


class MetricsServer:
    """The endpoint's sockets and the counters it accumulates. Inert while ``metrics_port`` is 0."""

    def __init__(self) -> None:
        self.address: tuple[str, int] | None = None   # what the config asks for
        self.listener: socket.socket | None = None
        self.clients: dict[int, tuple[socket.socket, bytearray, float]] = {}
        self.feed: AttemptFeed | None = None
        self.next_fold = 0.0
        self.started = time.time()

    # -- sockets --------------------------------------------------------------------------------

    def fds(self, config: Config) -> list[int]:
        """The fds to wait on; (re)binds when ``metrics_port``/``metrics_host`` changed."""
        want = (config.metrics_host, config.metrics_port) if config.metrics_port else None
        if want != self.address:
            self.close()
            self.address = want
            if want is not None:
                self.listener = _listen(want)
        if self.listener is None:
            return []
        return [self.listener.fileno(), *self.clients]

    @property
    def port(self) -> int | None:
        """The bound port (useful with metrics_port bound by the OS in tests), or None."""
        return self.listener.getsockname()[1] if self.listener is not None else None

    def close(self) -> None:
        for sock, _, _ in self.clients.values():
            sock.close()
        self.clients.clear()
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        self.address = None

    # -- the loop's part ------------------------------------------------------------------------

    def serve(self, ready: Iterable[int], store: Callable[[], OpsStore], counters: dict[str, int],
              **gauges: float) -> None:
        """Handle what ``ready`` says is readable; answer complete requests with the metrics
        (``store()`` gives the supervisor's connection; ``gauges`` are extra values such as the
        live and wanted worker counts). Never raises: a failed scrape is answered 500 and logged."""
        if self.listener is None:
            return
        ready = set(ready)
        now_m = time.monotonic()
        if self.listener.fileno() in ready:
            self._accept(now_m)
        for fd in [fd for fd in self.clients if fd in ready]:
            self._read(fd, store, counters, gauges)
        for fd, (sock, _, deadline) in list(self.clients.items()):
            if now_m >= deadline:
                self._drop(fd)
        if now_m >= self.next_fold:
            self.next_fold = now_m + FOLD_EVERY
            self._fold(store)

    def _accept(self, now_m: float) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()  # type: ignore[union-attr]
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                event(log, "metrics.accept_failed", logging.WARNING, error=str(exc))
                return
            if len(self.clients) >= MAX_CLIENTS:
                sock.close()
                continue
            sock.setblocking(False)
            self.clients[sock.fileno()] = (sock, bytearray(), now_m + CLIENT_TIMEOUT)

    def _read(self, fd: int, store: Callable[[], OpsStore], counters: dict[str, int],
              gauges: dict[str, float]) -> None:
        sock, buf, _ = self.clients[fd]
        try:
            data = sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(fd)
            return
        buf += data
        if b"\r\n\r\n" not in buf and b"\n\n" not in buf:
            if len(buf) > MAX_REQUEST:
                self._answer(fd, "431 Request Header Fields Too Large", "request too large\n")
            return
        method, path = _request_line(bytes(buf))
        if method != "GET":
            self._answer(fd, "405 Method Not Allowed", "use GET /metrics\n")
        elif path.split("?")[0] != "/metrics":
            self._answer(fd, "404 Not Found", "jobq metrics are at /metrics\n")
        else:
            self._answer(fd, *self._scrape(store, counters, gauges))

    def _scrape(self, store: Callable[[], OpsStore], counters: dict[str, int],
                gauges: dict[str, float]) -> tuple[str, str]:
        try:
            s = store()
            self._fold(store)
            return "200 OK", exposition(s, time.time(), self.feed, counters, gauges, self.started)
        except Exception as exc:  # noqa: BLE001 - a scrape must never take the supervisor down
            event(log, "metrics.scrape_failed", logging.ERROR, error=repr(exc))
            return "500 Internal Server Error", f"scrape failed: {exc}\n"

    def _fold(self, store: Callable[[], OpsStore]) -> None:
        try:
            s = store()
            if self.feed is None:
                self.feed = AttemptFeed(s)
            else:
                self.feed.poll(s)
        except Exception as exc:  # noqa: BLE001 - retried at the next fold
            event(log, "metrics.fold_failed", logging.WARNING, error=repr(exc))

    def _answer(self, fd: int, status: str, body: str) -> None:
        sock, _, _ = self.clients[fd]
        data = body.encode()
        head = (f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {len(data)}\r\n"
                f"Connection: close\r\n\r\n").encode()
        try:
            sock.settimeout(1.0)  # a small answer to a live client: the kernel buffer takes it at once
            sock.sendall(head + data)
        except OSError:
            pass
        self._drop(fd)

    def _drop(self, fd: int) -> None:
        sock, _, _ = self.clients.pop(fd)
        try:
            sock.close()
        except OSError:
            pass


def _listen(address: tuple[str, int]) -> socket.socket | None:
    host, port = address
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(MAX_CLIENTS)
        sock.setblocking(False)
    except OSError as exc:
        event(log, "metrics.unavailable", logging.ERROR, host=host, port=port, error=str(exc),
              note="no metrics endpoint until metrics_port or metrics_host changes")
        return None
    event(log, "metrics.listening", host=host, port=sock.getsockname()[1], path="/metrics")
    return sock


def _request_line(raw: bytes) -> tuple[str, str]:
    first = raw.split(b"\n", 1)[0].decode("latin-1").strip().split()
    return (first[0], first[1]) if len(first) >= 2 else ("", "")


# -- the text format ------------------------------------------------------------------------------


def exposition(store: OpsStore, now: float, feed: AttemptFeed | None, counters: dict[str, int],
               gauges: dict[str, float], started: float) -> str:
    """The Prometheus text (format 0.0.4) of the queue as of ``now``."""
    out = Exposition()
    out.family("jobq_jobs", "gauge", "Jobs in the database by status and type.")
    for r in admin.counts_by_type(store):
        out.sample("jobq_jobs", r["n"], status=r["status"], type=r["type"])
    out.family("jobq_jobs_scheduled", "gauge", "Pending jobs not due yet, by type.")
    for job_type, n in sorted(admin.scheduled_by_type(store, now).items()):
        out.sample("jobq_jobs_scheduled", n, type=job_type)
    oldest = admin.oldest_due(store, now)
    age = max(now - parse_iso(max(oldest["run_at"], oldest["created_at"])), 0.0) if oldest else 0.0
    out.gauge("jobq_oldest_pending_age_seconds", "How long the longest-waiting due job has waited.", age)
    out.gauge("jobq_paused", "1 while the queue is paused.", int(store.is_paused()))
    wal = store.wal_bytes()
    if wal is not None:  # PostgreSQL: no log of jobq's own, no gauge
        out.gauge("jobq_wal_bytes", "Size of the SQLite write-ahead log.", wal)
    for name, value in sorted(gauges.items()):
        out.gauge(f"jobq_{name}", DOCS.get(name, f"Supervisor gauge {name}."), value)
    out.gauge("jobq_metrics_start_time_seconds", "When these counters started (Unix time).", started)
    _attempt_counters(out, feed)
    for name, value in sorted(counters.items()):
        out.family(f"jobq_{name}_total", "counter", DOCS.get(name, f"Supervisor counter {name}."))
        out.sample(f"jobq_{name}_total", value)
    _histograms(out, feed)
    return out.text()


def _attempt_counters(out: "Exposition", feed: AttemptFeed | None) -> None:
    names = {"processed": None, "completed": "completed", "failed": "failed", "retried": "retry"}
    attempts = feed.totals.attempts if feed else {}
    types = sorted({t for t, _ in attempts})
    for name, outcome in names.items():
        metric = f"jobq_jobs_{name}_total"
        out.family(metric, "counter", DOCS[name])
        for t in types:
            n = sum(v for (tt, o), v in attempts.items() if tt == t and (outcome is None or o == outcome))
            out.sample(metric, n, type=t)


def _histograms(out: "Exposition", feed: AttemptFeed | None) -> None:
    for metric, attr, doc in (("jobq_job_wait_seconds", "wait", "From due (enqueued, or run_at) to start."),
                              ("jobq_job_run_seconds", "run", "From start to end of an attempt.")):
        out.family(metric, "histogram", doc)
        hists: dict[str, Histogram] = getattr(feed.totals, attr) if feed else {}
        for t, h in sorted(hists.items()):
            for bound, n in zip([*map(_num, BOUNDS), "+Inf"], h.buckets):
                out.sample(f"{metric}_bucket", n, type=t, le=bound)
            out.sample(f"{metric}_sum", h.sum, type=t)
            out.sample(f"{metric}_count", h.count, type=t)


class Exposition:
    """Builds the text: ``# HELP``/``# TYPE`` once per family, then its samples."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, doc: str) -> None:
        self.lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]

    def sample(self, name: str, value: float, **labels: Any) -> None:
        body = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
        self.lines.append(f"{name}{{{body}}} {_num(value)}" if body else f"{name} {_num(value)}")

    def gauge(self, name: str, doc: str, value: float) -> None:
        self.family(name, "gauge", doc)
        self.sample(name, value)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _num(v: float) -> str:
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    return repr(float(v))
