"""Prometheus metrics, served by the supervisor process itself, without threads.

When ``metrics_port`` is set, :class:`MetricsServer` keeps a non-blocking listening socket whose
fd (and those of connected clients) the arbiter's wait selects on; :meth:`MetricsServer.serve`
then accepts, reads and answers inside the arbiter loop. A request is answered once its headers
are in, and sent without blocking: what the socket does not take at once goes out as the client
reads (the loop also waits for that). A client that sends nothing for ``CLIENT_TIMEOUT``, or does
not read its answer within ``SEND_TIMEOUT``, is dropped, and at most ``MAX_CLIENTS`` are held,
so a slow or hostile client cannot stall the loop. Sockets are not inheritable: nothing crosses
the fork of a worker.

What a scrape is answered with, the Prometheus text, is ``supervisor.exposition``'s; this module
keeps the counters it folds from ``job_attempts`` between scrapes.
"""

from __future__ import annotations

import logging
import select
import socket
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable

from shared.settings.config import Config
from shared.runtime.logs import event, get_logger
from shared.engines.contract import OpsStore

from .exposition import exposition

if TYPE_CHECKING:
    from shared.ops.stats import AttemptFeed
# The ops layer (what a scrape reads) is imported at the first scrape or fold, not with this
# module: the supervisor imports this before its first workers start.

log = get_logger("supervisor")

MAX_CLIENTS = 16
MAX_REQUEST = 16 * 1024
CLIENT_TIMEOUT = 5.0  # seconds a client has to send its request
SEND_TIMEOUT = 10.0  # ... and to read the answer
FOLD_EVERY = 5.0  # seconds between folds of the attempt feed when nobody scrapes
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Client:
    """One connection: the request read so far, then the answer left to send."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.request = bytearray()
        self.deadline = deadline  # monotonic: dropped then, however far it got
        self.out: memoryview | None = None  # set once answered: what is still to send


class MetricsServer:
    """The endpoint's sockets and the counters it accumulates. Inert while ``metrics_port`` is 0."""

    def __init__(self) -> None:
        self.address: tuple[str, int] | None = None  # what the config asks for
        self.config: Config | None = None  # the config as of the last fds()
        self.listener: socket.socket | None = None
        self.clients: dict[int, _Client] = {}
        # Answers are sent without blocking: a client that does not read keeps its rest here and
        # its socket in this epoll set, whose own fd (readable when one of them can take more)
        # the loop selects on with the others. Linux only; elsewhere the loop's 1 s tick sends.
        self.writable: Any = None
        self.feed: AttemptFeed | None = None
        self.next_fold = 0.0
        self.started = time.time()

    # -- sockets --------------------------------------------------------------------------------

    def fds(self, config: Config) -> list[int]:
        """The fds to wait on; (re)binds when ``metrics_port``/``metrics_host`` changed. The
        config is kept for this turn's scrapes (its pools: which queues are served)."""
        self.config = config
        want = (config.metrics_host, config.metrics_port) if config.metrics_port else None
        if want != self.address:
            self.close()
            self.address = want
            if want is not None:
                self.listener = _listen(want)
                if self.listener is not None and hasattr(select, "epoll"):
                    self.writable = select.epoll()  # not inheritable, like the sockets
        if self.listener is None:
            return []
        reading = [fd for fd, c in self.clients.items() if c.out is None]
        sending = self.writable is not None and len(reading) < len(self.clients)
        return [self.listener.fileno(), *reading, *([self.writable.fileno()] if sending else [])]

    @property
    def port(self) -> int | None:
        """The bound port (useful with metrics_port bound by the OS in tests), or None."""
        return self.listener.getsockname()[1] if self.listener is not None else None

    def close(self) -> None:
        for fd in list(self.clients):
            self._drop(fd)
        if self.listener is not None:
            self.listener.close()
            self.listener = None
        if self.writable is not None:
            self.writable.close()
            self.writable = None
        self.address = None

    # -- the loop's part ------------------------------------------------------------------------

    def serve(
        self,
        ready: Iterable[int],
        store: Callable[[], OpsStore],
        counters: dict[str, int],
        **gauges: float,
    ) -> None:
        """Handle what ``ready`` says is readable; answer complete requests with the metrics
        (``store()`` gives the supervisor's connection; ``gauges`` are extra values such as the
        live and wanted worker counts); send what answers clients can take now. Never blocks,
        never raises: a failed scrape is answered 500 and logged."""
        if self.listener is None:
            return
        ready = set(ready)
        now_m = time.monotonic()
        if self.listener.fileno() in ready:
            self._accept(now_m)
        scraped: list[tuple[str, str]] = []

        def scrape() -> tuple[str, str]:  # requests that came in together share one scrape
            if not scraped:
                scraped.append(self._scrape(store, counters, gauges))
            return scraped[0]

        for fd in [fd for fd, c in self.clients.items() if fd in ready and c.out is None]:
            self._read(fd, scrape, now_m)
        for fd in [fd for fd, c in self.clients.items() if c.out is not None]:
            self._send(fd)
        for fd, client in list(self.clients.items()):
            if now_m >= client.deadline:
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
            self.clients[sock.fileno()] = _Client(sock, now_m + CLIENT_TIMEOUT)

    def _read(self, fd: int, scrape: Callable[[], tuple[str, str]], now_m: float) -> None:
        client = self.clients[fd]
        try:
            data = client.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._drop(fd)
            return
        buf = client.request
        buf += data
        if b"\r\n\r\n" not in buf and b"\n\n" not in buf:
            if len(buf) > MAX_REQUEST:
                self._answer(
                    fd, "431 Request Header Fields Too Large", "request too large\n", now_m
                )
            return
        method, path = _request_line(bytes(buf))
        if method != "GET":
            self._answer(fd, "405 Method Not Allowed", "use GET /metrics\n", now_m)
        elif path.split("?")[0] != "/metrics":
            self._answer(fd, "404 Not Found", "jobq metrics are at /metrics\n", now_m)
        else:
            self._answer(fd, *scrape(), now_m)

    def _scrape(
        self, store: Callable[[], OpsStore], counters: dict[str, int], gauges: dict[str, float]
    ) -> tuple[str, str]:
        try:
            s = store()
            self._fold(store)
            return "200 OK", exposition(
                s, time.time(), self.feed, counters, gauges, self.started, self.config
            )
        except Exception as exc:  # noqa: BLE001 - a scrape must never take the supervisor down
            event(log, "metrics.scrape_failed", logging.ERROR, error=repr(exc))
            return "500 Internal Server Error", f"scrape failed: {exc}\n"

    def _fold(self, store: Callable[[], OpsStore]) -> None:
        try:
            s = store()
            if self.feed is None:
                from shared.ops.stats import AttemptFeed  # here: see the imports

                self.feed = AttemptFeed(s)
            else:
                self.feed.poll(s)
        except Exception as exc:  # noqa: BLE001 - retried at the next fold
            event(log, "metrics.fold_failed", logging.WARNING, error=repr(exc))

    def _answer(self, fd: int, status: str, body: str, now_m: float) -> None:
        """Queue the answer and send what the socket takes now; the rest goes out as the client
        reads, until ``SEND_TIMEOUT`` (a client that never reads holds nothing up)."""
        client = self.clients[fd]
        data = body.encode()
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n\r\n"
        ).encode()
        client.out = memoryview(head + data)
        client.deadline = now_m + SEND_TIMEOUT
        if self.writable is not None:
            self.writable.register(fd, select.EPOLLOUT)
        self._send(fd)

    def _send(self, fd: int) -> None:
        """Send what the client's socket takes without blocking; drop it once all is sent."""
        client = self.clients[fd]
        out = client.out
        try:
            while out:
                out = out[client.sock.send(out) :]
        except (BlockingIOError, InterruptedError):
            client.out = out
            return
        except OSError:
            pass  # the client went away: nothing more to send
        self._drop(fd)

    def _drop(self, fd: int) -> None:
        client = self.clients.pop(fd)
        if client.out is not None and self.writable is not None:
            try:
                self.writable.unregister(fd)
            except OSError:
                pass
        try:
            client.sock.close()
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
        event(
            log,
            "metrics.unavailable",
            logging.ERROR,
            host=host,
            port=port,
            error=str(exc),
            note="no metrics endpoint until metrics_port or metrics_host changes",
        )
        return None
    event(log, "metrics.listening", host=host, port=sock.getsockname()[1], path="/metrics")
    return sock


def _request_line(raw: bytes) -> tuple[str, str]:
    first = raw.split(b"\n", 1)[0].decode("latin-1").strip().split()
    return (first[0], first[1]) if len(first) >= 2 else ("", "")
