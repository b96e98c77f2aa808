"""Two hosts on one machine, for the PostgreSQL proofs (tests/proofs/test_two_hosts.py).

A *host* is a supervisor in namespaces of its own, reaching the server only through a proxy the
test owns, so the test can cut it off:

    test process (root namespaces)                        host "a" (its own net, pid, uts, mount ns)
      Proxy on 10.231.X.Y+1:PORT  <--- veth pair --->  10.231.X.Y+2  supervisor (pid 1), workers
        |  forwards to the server (127.0.0.1:5432 or the local socket)

- :class:`Netns`: one network namespace with a veth pair to the root namespace (a /30 of
  10.231.0.0/16). PostgreSQL listens on 127.0.0.1 only, so a host sees nothing but its proxy.
- :class:`Proxy`: a TCP forwarder in a thread of the test process. ``cut("blackhole")`` freezes
  every connection (no byte passes, nothing is closed, new connections are accepted and frozen
  too): a partition as a host sees it, where calls hang instead of failing. ``cut("refuse")``
  resets every connection and refuses new ones: the host learns at once. ``heal()`` resets
  the frozen connections (or with ``resume=True`` lets them carry on) and forwards again.
  ``lose_answer(pattern)`` blackholes once the server sends a host bytes holding ``pattern`` (a
  value of a statement's result), without passing them on: the server ran the statement and
  committed it, its answer never arrives. (Matching the answer, not the statement's text: a
  statement psycopg has prepared is sent without its text.)
- :class:`Host`: ``setpriv --pdeathsig KILL ip netns exec NS unshare --pid --fork --mount-proc
  --uts --kill-child sh -c 'hostname H; exec python -m supervisor run ...'``. The supervisor is
  pid 1 of its pid namespace, so SIGKILL of it takes the whole host down (the kernel kills every
  process of the namespace); if the test process dies, pdeathsig and --kill-child do the same.
  Each host has its own hostname (a UTS namespace: hosts are told apart by hostname) and its
  own TMPDIR (supervisors keep folders in the temporary directory and sweep those whose pid is
  gone: with a shared /tmp, the other namespace's pid 1 would look dead).
- Names (namespaces, veth devices) carry the test process's pid; leftovers of a dead test
  process are removed by the next run (:func:`remove_leftovers`).

Everything here polls with deadlines (:func:`tests.proc.wait_until`), never sleeps blindly.
"""

from __future__ import annotations

import os
import random
import re
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psutil

from tests.proc import FIXTURES, is_worker, live_children, wait_until, write_config

DEFAULT_URL = "postgresql:///test?host=/var/run/postgresql"
NETNS_PREFIX = "jobq-twohost-"
VETH_PREFIX = "jqt"  # + pid + r|n + index: at most 15 characters (IFNAMSIZ)
_NETNS_NAME = re.compile(re.escape(NETNS_PREFIX) + r"(\d+)-(\d+)$")
_ids = iter(range(1, 1 << 30))


def server_url() -> str:
    return os.environ.get("JOBQ_TEST_POSTGRES") or DEFAULT_URL


def required() -> bool:
    return os.environ.get("JOBQ_REQUIRE_POSTGRES") == "1"


def missing() -> tuple[str, bool] | None:
    """Why two hosts cannot run here, and whether that reason may skip even when PostgreSQL is
    required (not root: namespaces need root; CI runs as root, a developer's laptop may not).
    None when everything is there."""
    if os.geteuid() != 0:
        return "two-host tests need root (network and pid namespaces)", True
    for tool in ("ip", "unshare", "setpriv", "hostname"):
        if shutil.which(tool) is None:
            return f"two-host tests need the `{tool}` command", False
    try:
        import psycopg  # noqa: F401 - tests may name the driver; the product's layers may not
    except ImportError:
        return "two-host tests need psycopg (pip install -e '.[postgres]')", False
    try:
        with connect() as c:
            c.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - any failure means: no server to test against
        return f"no PostgreSQL server at {server_url()}: {exc}".strip(), False
    return None


def connect(url: str | None = None, **kw: Any):
    """A plain psycopg connection (autocommit) to the server, or through a proxy (``url``)."""
    import psycopg

    kw.setdefault("connect_timeout", 5)
    return psycopg.connect(url or server_url(), autocommit=True, **kw)


def upstream(url: str | None = None) -> tuple[int, Any]:
    """Where a proxy forwards to: (family, address) of the server at ``url`` (default
    ``server_url()``): a TCP address or the server's Unix socket."""
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(url or server_url())
    host, port = info.get("host") or "/var/run/postgresql", int(info.get("port") or 5432)
    if host.startswith("/"):
        return socket.AF_UNIX, f"{host}/.s.PGSQL.{port}"
    return socket.AF_INET, (host, port)


def host_url(proxy: "Proxy", url: str | None = None, port: int | None = None) -> str:
    """The server's URL as a host sees it: the same database and user, through ``proxy`` (its
    first route, or ``port``, a route to ``url``: :meth:`Proxy.route`)."""
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(url or proxy.url)
    user = info.get("user") or os.environ.get("PGUSER") or "root"
    db = info.get("dbname") or "test"
    return f"postgresql://{quote(user)}@{proxy.host}:{port or proxy.port}/{quote(db)}"


def run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command (ip ...) and fail with its stderr when it fails."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


# -- network ---------------------------------------------------------------------------------


def _used_subnets() -> set[str]:
    out = run("ip", "-4", "-o", "addr", "show", check=False).stdout
    return set(re.findall(r"inet (10\.231\.\d+\.\d+)/", out))


class Netns:
    """A network namespace with a veth pair to the root namespace; ``close()`` removes both."""

    def __init__(self) -> None:
        n = next(_ids)
        self.name = f"{NETNS_PREFIX}{os.getpid()}-{n}"
        self.root_dev, self.ns_dev = (f"{VETH_PREFIX}{os.getpid()}{side}{n}" for side in "rn")
        used = _used_subnets()
        while True:  # a free /30 (other test runs may hold some)
            third, fourth = random.randrange(256), random.randrange(0, 256, 4)
            self.root_addr, self.ns_addr = (
                f"10.231.{third}.{fourth + 1}",
                f"10.231.{third}.{fourth + 2}",
            )
            if self.root_addr not in used and self.ns_addr not in used:
                break
        try:
            run("ip", "netns", "add", self.name)
            run("ip", "link", "add", self.root_dev, "type", "veth", "peer", "name", self.ns_dev)
            run("ip", "link", "set", self.ns_dev, "netns", self.name)
            run("ip", "addr", "add", f"{self.root_addr}/30", "dev", self.root_dev)
            run("ip", "link", "set", self.root_dev, "up")
            run("ip", "-n", self.name, "addr", "add", f"{self.ns_addr}/30", "dev", self.ns_dev)
            run("ip", "-n", self.name, "link", "set", self.ns_dev, "up")
            run("ip", "-n", self.name, "link", "set", "lo", "up")
        except BaseException:
            self.close()
            raise

    def exec_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.name]

    def close(self) -> None:
        run("ip", "link", "del", self.root_dev, check=False)  # takes the peer with it
        run("ip", "netns", "del", self.name, check=False)


def netns_names() -> list[str]:
    out = run("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def remove_leftovers() -> list[str]:
    """Remove the namespaces (and veth devices) of test processes that are gone."""
    removed = []
    for name in netns_names():
        m = _NETNS_NAME.match(name)
        if m is None or psutil.pid_exists(int(m.group(1))):
            continue
        run("ip", "link", "del", f"{VETH_PREFIX}{m.group(1)}r{m.group(2)}", check=False)
        run("ip", "netns", "del", name, check=False)
        removed.append(name)
    return removed


# -- the proxy -------------------------------------------------------------------------------

_RST = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends a reset, not a FIN


def _reset(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST)
    except OSError:
        pass
    sock.close()


class Proxy:
    """A TCP forwarder from ``host``:``port`` (port chosen by the system) to the server, with
    ``cut()`` and ``heal()``. One thread runs a selector over every socket; cut and heal are
    carried out by that thread and return once in effect (no byte passes after ``cut()``).
    :meth:`route` forwards another port of ``host`` to another server (a pooler's host reaches
    the pooler and, for its wake-ups, the server itself): one cut or heal takes every route.

    ``accepted`` counts connections accepted, ``live()`` the pairs forwarding now."""

    def __init__(self, host: str, url: str | None = None) -> None:
        self.host = host
        self.url = url or server_url()
        self.mode = "open"
        self.accepted = 0
        self.events: list[
            tuple[float, str, bool]
        ] = []  # (monotonic, why a pair closed, from the host's side)
        self._sel = selectors.DefaultSelector()
        self._pairs: dict[socket.socket, socket.socket] = {}  # each side -> the other side
        self._frozen: list[tuple[socket.socket, int]] = []  # (client, port) accepted blackholed
        self._calls: list[tuple[Any, threading.Event]] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._routes: dict[int, tuple[int, Any]] = {}  # port -> (family, address) it forwards to
        self._listeners: dict[int, socket.socket] = {}  # port -> its socket (none while refusing)
        self._clients: set[socket.socket] = set()  # the host's side of each pair
        self._trigger: bytes | None = None  # see lose_answer
        self.tripped: float | None = None  # monotonic time lose_answer's pattern came
        self.port = self._open_route(self.url)
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name=f"proxy-{host}", daemon=True)
        self._thread.start()

    # called from the test's thread

    def cut(self, mode: str = "blackhole") -> None:
        if mode not in ("blackhole", "refuse"):
            raise ValueError(f"Proxy.cut: mode must be 'blackhole' or 'refuse', not {mode!r}")
        self._call(lambda: self._cut(mode))

    def lose_answer(self, pattern: bytes) -> None:
        """Blackhole as soon as the server's bytes to a host hold ``pattern``, and drop them
        (``tripped`` records when): the statement ran, its answer never arrives."""
        self.tripped = None
        self._call(lambda: setattr(self, "_trigger", pattern))

    def route(self, url: str) -> int:
        """Forward another port (returned) of this proxy's host to the server at ``url``."""
        return self._call(lambda: self._open_route(url))

    def heal(self, resume: bool = False) -> None:
        self._call(lambda: self._heal(resume))

    def live(self) -> int:
        return self._call(lambda: len(self._pairs) // 2)

    def close(self) -> None:
        if not self._stop:
            self._call(self._shutdown)
            self._thread.join(5)
        self._wake_r.close()
        self._wake_w.close()

    def _call(self, fn: Any) -> Any:
        done, box = threading.Event(), []
        self._calls.append((lambda: box.append(fn()), done))
        self._wake_w.send(b"x")
        if not done.wait(10):
            raise AssertionError(f"proxy {self.host}:{self.port} did not answer within 10 s")
        return box[0] if box else None

    # the proxy's thread

    def _open_route(self, url: str) -> int:
        port = self._listen(0)
        self._routes[port] = upstream(url)
        return port

    def _listen(self, port: int) -> int:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((self.host, port))
        s.listen(128)
        port = s.getsockname()[1]
        self._listeners[port] = s
        self._sel.register(s, selectors.EVENT_READ, ("accept", port))
        return port

    def _close_listeners(self) -> None:
        for s in self._listeners.values():
            self._sel.unregister(s)
            s.close()  # new connections: refused by the kernel
        self._listeners.clear()

    def _loop(self) -> None:
        while not self._stop:
            for key, _ in self._sel.select(1.0):
                if key.data == "wake":
                    self._wake_r.recv(4096)
                    while self._calls:
                        fn, done = self._calls.pop(0)
                        try:
                            fn()
                        finally:
                            done.set()
                elif isinstance(key.data, tuple):
                    self._accept(key.data[1])
                elif key.fileobj in self._pairs:
                    self._forward(key.fileobj)

    def _accept(self, port: int) -> None:
        try:
            client, _ = self._listeners[port].accept()
        except (OSError, KeyError):
            return
        self.accepted += 1
        if self.mode == "blackhole":
            self._frozen.append((client, port))  # accepted, never answered, never closed
            return
        self._pair(client, port)

    def _pair(self, client: socket.socket, port: int) -> None:
        """Connect ``client`` (accepted on ``port``) to its route's server and forward."""
        family, target = self._routes[port]
        server = socket.socket(family, socket.SOCK_STREAM)
        server.settimeout(3)
        try:
            server.connect(target)
        except OSError:  # the server is down (a restart): the client sees its connection close
            server.close()
            _reset(client)
            return
        for s in (client, server):
            s.settimeout(5)  # a send to a stuck peer fails instead of stalling every connection
        self._pairs[client], self._pairs[server] = server, client
        self._clients.add(client)
        self._sel.register(client, selectors.EVENT_READ, "pair")
        self._sel.register(server, selectors.EVENT_READ, "pair")

    def _forward(self, sock: socket.socket) -> None:
        peer = self._pairs[sock]
        try:
            data = sock.recv(65536)
            if data:
                if (
                    self._trigger is not None
                    and self._trigger in data
                    and not self._from_host(sock)
                ):
                    self._trigger, self.tripped = None, time.monotonic()
                    self._cut("blackhole")
                    return
                peer.sendall(data)
                return
            why = "eof"
        except OSError as exc:
            why = repr(exc)
        self.events.append((time.monotonic(), why, self._from_host(sock)))
        self._drop_pair(sock, reset=False)

    def _from_host(self, sock: socket.socket) -> bool:
        return sock in self._clients

    def _drop_pair(self, sock: socket.socket, reset: bool) -> None:
        peer = self._pairs.pop(sock)
        self._pairs.pop(peer, None)
        self._clients.difference_update((sock, peer))
        for s in (sock, peer):
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            _reset(s) if reset else s.close()

    def _cut(self, mode: str) -> None:
        if mode == "blackhole":
            for s in self._pairs:  # frozen: no longer read, still open
                try:
                    self._sel.unregister(s)
                except (KeyError, ValueError):
                    pass
        else:
            self._reset_all()
            self._close_listeners()
        self.mode = mode

    def _heal(self, resume: bool) -> None:
        if self.mode == "blackhole":
            if resume:
                for s in self._pairs:
                    self._sel.register(s, selectors.EVENT_READ, "pair")
                frozen, self._frozen = self._frozen, []
                self.mode = "open"
                for client, port in frozen:  # as if their handshake got through only now
                    self._pair(client, port)
            else:
                self._reset_all()
        for port in self._routes:
            if port not in self._listeners:
                self._listen(port)
        self.mode = "open"

    def _reset_all(self) -> None:
        for s in list(self._pairs):
            if s in self._pairs:
                self._drop_pair(s, reset=True)
        for client, _ in self._frozen:
            _reset(client)
        self._frozen = []

    def _shutdown(self) -> None:
        self._reset_all()
        self._close_listeners()
        self._stop = True


# -- hosts -----------------------------------------------------------------------------------


def nspid(pid: int) -> int | None:
    """The pid of root-namespace process ``pid`` inside its own (innermost) pid namespace."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except OSError:
        return None
    return None


class Host:
    """One supervisor in its own network, pid, UTS and mount namespaces behind its own proxy.

    ``folder`` holds its jobq.toml, its log and its TMPDIR. ``start()`` runs it, ``kill()``
    SIGKILLs its whole pid namespace, ``close()`` leaves nothing behind (processes, namespace,
    proxy). With ``listen`` (the server's URL), ``url`` is a transaction pooler's: the host runs
    in pooled mode and its ``[postgres] listen`` connection goes through the same proxy (a cut
    takes both, as a partition of the host would)."""

    def __init__(
        self,
        name: str,
        folder: Path,
        schema: str,
        url: str | None = None,
        listen: str | None = None,
        **sections: Any,
    ) -> None:
        self.name = name
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tmp").mkdir(exist_ok=True)
        self.hostname = f"jobq-{name}-{os.getpid()}"
        self.netns = Netns()
        try:
            self.proxy = Proxy(self.netns.root_addr, url)
        except BaseException:
            self.netns.close()
            raise
        self.listen = listen
        postgres = sections.setdefault("postgres", {})
        postgres.setdefault("schema", schema)
        if listen is not None:
            postgres.setdefault("mode", "pooled")
            postgres["listen"] = host_url(self.proxy, listen, self.proxy.route(listen))
        self.config = write_config(folder, database=host_url(self.proxy), **sections)
        self.proc: subprocess.Popen | None = None
        self.log_path = folder / "supervisor.log"
        self._log = None

    def command(self, *argv: str) -> list[str]:
        """``argv`` run inside this host's namespaces (a new pid namespace each time)."""
        return [
            "setpriv",
            "--pdeathsig",
            "KILL",
            *self.netns.exec_prefix(),
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "--uts",
            "--kill-child",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            self.hostname,
            *argv,
        ]

    def env(self) -> dict[str, str]:
        e = dict(os.environ)
        here = str(Path(__file__).parent.parent)
        e["PYTHONPATH"] = os.pathsep.join(p for p in (FIXTURES, here, e.get("PYTHONPATH", "")) if p)
        e["TMPDIR"] = str(self.folder / "tmp")
        e.pop("JOBQ_DATABASE", None)
        e.pop("JOBQ_CONFIG", None)
        return e

    def start(self, *argv: str) -> None:
        """Run the supervisor on the host's config (or ``argv`` instead, for the harness's tests)."""
        argv = argv or (sys.executable, "-m", "supervisor", "run", "--config", str(self.config))
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.command(*argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self.env(),
            cwd=str(self.folder),
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def init(self) -> psutil.Process | None:
        """The supervisor (pid 1 of the host's pid namespace), seen from the root namespace."""
        if self.proc is None:
            return None
        kids = live_children(self.proc.pid)
        return kids[0] if kids else None

    def tree(self) -> list[psutil.Process]:
        init = self.init()
        return [init, *live_children(init.pid, recursive=True)] if init else []

    def workers(self) -> dict[int, int]:
        """The host's live workers: {pid inside the host: pid in the root namespace}."""
        out = {}
        for p in self.tree()[1:]:
            if is_worker(p):
                inner = nspid(p.pid)
                if inner is not None:
                    out[inner] = p.pid
        return out

    def describe(self) -> str:
        """The host's processes, one a line (for failure reports): pids, name, state, wait channel."""
        out = []
        for p in self.tree():
            try:
                wchan = Path(f"/proc/{p.pid}/wchan").read_text()
                out.append(f"{p.pid} (ns {nspid(p.pid)}) {p.name()} {p.status()} {wchan}")
            except (OSError, psutil.Error):
                pass
        return "\n".join(out)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the host's whole process tree (its pid namespace) and wait until it is gone."""
        init = self.init()
        tree = self.tree()
        if init is not None:
            try:
                init.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        if self.proc is not None:
            self.proc.wait(10)
        psutil.wait_procs(tree, timeout=10)
        left = [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        if left:
            raise AssertionError(f"host {self.name}: processes outlived SIGKILL of pid 1: {left}")

    def stop(self, timeout: float = 20) -> int | None:
        """SIGTERM the supervisor (a graceful stop); its exit code, or None if it was not running."""
        init = self.init()
        if init is None or self.proc is None:
            return None
        init.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        return self.proc.returncode

    def close(self) -> None:
        try:
            if self.alive():
                self.kill()
        finally:
            try:
                self.proxy.close()
            finally:
                self.netns.close()
                if self._log is not None:
                    self._log.close()


def drop_schema(schema: str, url: str | None = None) -> None:
    with connect(url) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    return wait_until(predicate, timeout=timeout, what=what, interval=0.02)


# -- two hosts on one schema -------------------------------------------------------------------

HOST_SETTINGS: dict[str, Any] = {
    "handlers": ["twohostjobs"],
    "log_format": "json",
    "supervisor": {
        "workers": 2,
        "maintenance_interval": 0.2,
        "shutdown_timeout": 5,
        "kill_grace": 1,
        "config_poll_interval": 0,
    },
    # short leases for speed; poll_interval only matters if LISTEN wake-ups are lost
    "worker": {"lease_timeout": 3, "heartbeat_interval": 0.5, "poll_interval": 0.5},
    "retry": {"backoff_base": 0, "backoff_max": 0},
}


class Cluster:
    """Hosts ``names`` on one schema of the test server (dropped by ``close()``), the execution
    log and lock folder of the ``twohost:work`` handler, and a queue opened on the server
    directly (not through a proxy: the test's own view stays up whatever the hosts see).

    With ``pooler`` (a transaction pooler's URL in front of ``url``), each host reaches the
    pooler through its proxy, in pooled mode, and listens on ``url`` through the same proxy;
    the test's view stays on ``url``."""

    def __init__(
        self,
        folder: Path,
        names: tuple[str, ...] = ("a", "b"),
        url: str | None = None,
        pooler: str | None = None,
        **settings: Any,
    ) -> None:
        self.url = url or server_url()
        self.schema = f"jobq_twohost_{os.getpid()}_{next(_ids)}"
        self.log = folder / "exec.log"
        self.locks = folder / "locks"
        self.locks.mkdir(parents=True, exist_ok=True)
        sections = {k: dict(v) if isinstance(v, dict) else v for k, v in HOST_SETTINGS.items()}
        for k, v in settings.items():
            sections[k] = {**sections.get(k, {}), **v} if isinstance(v, dict) else v
        self.hosts: dict[str, Host] = {}
        self.queue = None
        try:
            for name in names:
                self.hosts[name] = Host(
                    name,
                    folder / name,
                    self.schema,
                    pooler or self.url,
                    listen=self.url if pooler else None,
                    **{k: dict(v) if isinstance(v, dict) else v for k, v in sections.items()},
                )
            from shared.producer.api import JobQueue
            from shared.settings.config import load

            cfg = load(next(iter(self.hosts.values())).config).replace(database=self.url)
            self.queue = JobQueue(config=cfg)
        except BaseException:
            self.close()
            raise

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def start(self, workers: int) -> None:
        """Start every host and wait until each has ``workers`` live workers."""
        for h in self.hosts.values():
            h.start()
        for h in self.hosts.values():
            wait_for(lambda: len(h.workers()) >= workers, 30, f"host {h.name}'s {workers} workers")

    def enqueue(self, n: int, sleep: float, rerun_sleep: float | None = None) -> list[str]:
        payload = {"log": str(self.log), "locks": str(self.locks), "sleep": sleep}
        if rerun_sleep is not None:
            payload["rerun_sleep"] = rerun_sleep
        return self.queue.enqueue_many([("twohost:work", payload)] * n)

    def lines(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        import json

        return [json.loads(x) for x in self.log.read_text().splitlines() if x.strip()]

    def statuses(self, ids: list[str]) -> dict[str, int]:
        """{status: how many of ``ids``}, in one query (the test polls this)."""
        with connect(self.url) as c:
            rows = c.execute(
                f'SELECT status, count(*) FROM "{self.schema}".jobs WHERE id = ANY(%s) '
                "GROUP BY status",
                (list(ids),),
            ).fetchall()
        return dict(rows)

    def jobs(self, ids: list[str]) -> list[dict[str, Any]]:
        """The rows of ``ids`` that are not completed (for failure messages)."""
        from psycopg.rows import dict_row

        with connect(self.url, row_factory=dict_row) as c:
            return c.execute(
                f'SELECT id, status, attempts, owner, heartbeat_at FROM "{self.schema}".jobs '
                "WHERE id = ANY(%s) AND status <> 'completed'",
                (list(ids),),
            ).fetchall()

    def wait_completed(self, ids: list[str], timeout: float) -> None:
        def done() -> bool:
            return self.statuses(ids).get("completed", 0) == len(ids)

        try:
            wait_until(done, timeout=timeout, what=f"{len(ids)} jobs completed", interval=0.1)
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}; statuses {self.statuses(ids)}; not completed: {self.jobs(ids)[:5]}"
            ) from None

    def close(self) -> None:
        try:
            for h in self.hosts.values():
                h.close()
        finally:
            if self.queue is not None:
                self.queue.close()
            try:
                drop_schema(self.schema, self.url)
            except Exception:  # noqa: BLE001 - a server of the test's own may be gone already
                if self.url == server_url():
                    raise


def runs(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The runs of each job from the execution log: start lines, each with its ``end`` line
    (or None: the run was killed or fenced), in order of start."""
    out: dict[str, list[dict[str, Any]]] = {}
    open_runs: dict[tuple[str, str, int], dict[str, Any]] = {}
    for line in sorted(lines, key=lambda x: x["mono"]):
        key = (line["job"], line["host"], line["pid"])
        if line["ev"] == "start":
            run = {**line, "end": None}
            out.setdefault(line["job"], []).append(run)
            open_runs[key] = run
        elif key in open_runs:
            open_runs.pop(key)["end"] = line["mono"]
    return out


def overlaps(lines: list[dict[str, Any]]) -> list[str]:
    """Every overlap the log shows: a run that found the job's flock taken, or a run that
    started before the previous run of its job ended (when that one's end is known)."""
    found = []
    for job, rs in runs(lines).items():
        for prev, cur in zip(rs, rs[1:]):
            if cur["overlap"]:
                found.append(
                    f"job {job}: run on {cur['host']} pid {cur['pid']} found the lock taken"
                )
            elif prev["end"] is not None and cur["mono"] < prev["end"]:
                found.append(
                    f"job {job}: run on {cur['host']} started {prev['end'] - cur['mono']:.3f} s "
                    f"before the run on {prev['host']} ended"
                )
        if rs and rs[0]["overlap"]:
            found.append(f"job {job}: first run found the lock taken")
    return found


# -- a server of the test's own (restarted by scenario (c)) -----------------------------------


def pg_bindir() -> str | None:
    """The folder of PostgreSQL's server programs (initdb, pg_ctl), newest version first."""
    for version in (
        sorted(
            os.listdir("/usr/lib/postgresql"),
            key=lambda v: int(v) if v.isdigit() else 0,
            reverse=True,
        )
        if os.path.isdir("/usr/lib/postgresql")
        else []
    ):
        path = f"/usr/lib/postgresql/{version}/bin"
        if os.path.exists(f"{path}/pg_ctl") and os.path.exists(f"{path}/initdb"):
            return path
    found = shutil.which("pg_ctl")
    return os.path.dirname(found) if found and shutil.which("initdb") else None


class PrivateServer:
    """A PostgreSQL server of the test's own (initdb in ``folder``, owned by the ``postgres``
    user: the server refuses to run as root), on 127.0.0.1 and a free port, trust
    authentication for ``root``. The machine's shared server is not restarted: other sessions
    and test runs use it at the same time. ``restart()`` is ``pg_ctl restart -m fast``;
    ``close()`` stops it and removes its files."""

    def __init__(self, folder: Path, bindir: str, user: str = "postgres") -> None:
        self.folder, self.bindir, self.user = folder, bindir, user
        self.data = folder / "data"
        folder.mkdir(parents=True, exist_ok=True)
        shutil.chown(folder, user)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"postgresql://root@127.0.0.1:{self.port}/postgres"
        self._as_owner(
            f"{bindir}/initdb",
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "root",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        )
        self._as_owner(
            f"{bindir}/pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(folder / "server.log"),
            "-o",
            self._options(),
            "-w",
            "-t",
            "30",
            "start",
        )

    def _options(self) -> str:
        return (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.folder}"
            " -c fsync=off -c max_connections=60 -c shared_buffers=16MB"
        )

    def _as_owner(self, *argv: str) -> None:
        done = subprocess.run(
            ["runuser", "-u", self.user, "--", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=str(self.folder),
        )
        if done.returncode != 0:
            log = self.folder / "server.log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr.strip()} {tail}"
            )

    def restart(self) -> None:
        self._as_owner(
            f"{self.bindir}/pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "server.log"),
            "-m",
            "fast",
            "-w",
            "-t",
            "30",
            "-o",
            self._options(),
            "restart",
        )

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                [
                    "runuser",
                    "-u",
                    self.user,
                    "--",
                    f"{self.bindir}/pg_ctl",
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "-w",
                    "stop",
                ],
                capture_output=True,
                timeout=60,
            )
        shutil.rmtree(
            self.folder.parent
            if self.folder.parent.name.startswith("jobq-twohost-pg-")
            else self.folder,
            ignore_errors=True,
        )
