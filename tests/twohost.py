"""Two hosts on one machine, for the PostgreSQL proofs of issue 14 (tests/test_two_hosts.py).

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
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psutil

from tests.proc import FIXTURES, is_worker, live_children, wait_until, write_config

DEFAULT_URL = "postgresql:///test?host=/var/run/postgresql"
NETNS_PREFIX = "jobq-twohost-"
VETH_PREFIX = "jqt"            # + pid + r|n + index: at most 15 characters (IFNAMSIZ)
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


def upstream() -> tuple[int, Any]:
    """Where the proxies forward to: (family, address) of the server in ``server_url()``."""
    from psycopg.conninfo import conninfo_to_dict
    info = conninfo_to_dict(server_url())
    host, port = info.get("host") or "/var/run/postgresql", int(info.get("port") or 5432)
    if host.startswith("/"):
        return socket.AF_UNIX, f"{host}/.s.PGSQL.{port}"
    return socket.AF_INET, (host, port)


def host_url(proxy: "Proxy") -> str:
    """The server's URL as a host sees it: the same database and user, through ``proxy``."""
    from psycopg.conninfo import conninfo_to_dict
    info = conninfo_to_dict(server_url())
    user = info.get("user") or os.environ.get("PGUSER") or "root"
    db = info.get("dbname") or "test"
    return f"postgresql://{quote(user)}@{proxy.host}:{proxy.port}/{quote(db)}"


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
            self.root_addr, self.ns_addr = f"10.231.{third}.{fourth + 1}", f"10.231.{third}.{fourth + 2}"
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

    ``accepted`` counts connections accepted, ``live()`` the pairs forwarding now."""

    def __init__(self, host: str) -> None:
        self.host = host
        self.family, self.target = upstream()
        self.mode = "open"
        self.accepted = 0
        self._sel = selectors.DefaultSelector()
        self._pairs: dict[socket.socket, socket.socket] = {}   # each side -> the other side
        self._frozen: list[socket.socket] = []                 # accepted while blackholed
        self._calls: list[tuple[Any, threading.Event]] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._listener: socket.socket | None = None
        self.port = 0
        self._listen()
        self._stop = False
        self._thread = threading.Thread(target=self._loop, name=f"proxy-{host}", daemon=True)
        self._thread.start()

    # called from the test's thread

    def cut(self, mode: str = "blackhole") -> None:
        if mode not in ("blackhole", "refuse"):
            raise ValueError(f"Proxy.cut: mode must be 'blackhole' or 'refuse', not {mode!r}")
        self._call(lambda: self._cut(mode))

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

    def _listen(self) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((self.host, self.port))
        s.listen(128)
        self.port = s.getsockname()[1]
        self._listener = s
        self._sel.register(s, selectors.EVENT_READ, "accept")

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
                elif key.data == "accept":
                    self._accept()
                elif key.fileobj in self._pairs:
                    self._forward(key.fileobj)

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        self.accepted += 1
        if self.mode == "blackhole":
            self._frozen.append(client)  # accepted, never answered, never closed
            return
        self._pair(client)

    def _pair(self, client: socket.socket) -> None:
        """Connect ``client`` to the server and forward between them."""
        server = socket.socket(self.family, socket.SOCK_STREAM)
        server.settimeout(3)
        try:
            server.connect(self.target)
        except OSError:   # the server is down (a restart): the client sees its connection close
            server.close()
            _reset(client)
            return
        for s in (client, server):
            s.settimeout(5)  # a send to a stuck peer fails instead of stalling every connection
        self._pairs[client], self._pairs[server] = server, client
        self._sel.register(client, selectors.EVENT_READ, "pair")
        self._sel.register(server, selectors.EVENT_READ, "pair")

    def _forward(self, sock: socket.socket) -> None:
        peer = self._pairs[sock]
        try:
            data = sock.recv(65536)
            if data:
                peer.sendall(data)
                return
        except OSError:
            pass
        self._drop_pair(sock, reset=False)

    def _drop_pair(self, sock: socket.socket, reset: bool) -> None:
        peer = self._pairs.pop(sock)
        self._pairs.pop(peer, None)
        for s in (sock, peer):
            try:
                self._sel.unregister(s)
            except (KeyError, ValueError):
                pass
            _reset(s) if reset else s.close()

    def _cut(self, mode: str) -> None:
        if mode == "blackhole":
            for s in self._pairs:          # frozen: no longer read, still open
                try:
                    self._sel.unregister(s)
                except (KeyError, ValueError):
                    pass
        else:
            self._reset_all()
            if self._listener is not None:
                self._sel.unregister(self._listener)
                self._listener.close()     # new connections: refused by the kernel
                self._listener = None
        self.mode = mode

    def _heal(self, resume: bool) -> None:
        if self.mode == "blackhole":
            if resume:
                for s in self._pairs:
                    self._sel.register(s, selectors.EVENT_READ, "pair")
                frozen, self._frozen = self._frozen, []
                self.mode = "open"
                for client in frozen:      # as if their handshake got through only now
                    self._pair(client)
            else:
                self._reset_all()
        if self._listener is None:
            self._listen()
        self.mode = "open"

    def _reset_all(self) -> None:
        for s in list(self._pairs):
            if s in self._pairs:
                self._drop_pair(s, reset=True)
        for client in self._frozen:
            _reset(client)
        self._frozen = []

    def _shutdown(self) -> None:
        self._reset_all()
        if self._listener is not None:
            self._sel.unregister(self._listener)
            self._listener.close()
            self._listener = None
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
    proxy)."""

    def __init__(self, name: str, folder: Path, schema: str, **sections: Any) -> None:
        self.name = name
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tmp").mkdir(exist_ok=True)
        self.hostname = f"jobq-{name}-{os.getpid()}"
        self.netns = Netns()
        try:
            self.proxy = Proxy(self.netns.root_addr)
        except BaseException:
            self.netns.close()
            raise
        sections.setdefault("postgres", {}).setdefault("schema", schema)
        self.config = write_config(folder, database=host_url(self.proxy), **sections)
        self.proc: subprocess.Popen | None = None
        self.log_path = folder / "supervisor.log"
        self._log = None

    def command(self, *argv: str) -> list[str]:
        """``argv`` run inside this host's namespaces (a new pid namespace each time)."""
        return ["setpriv", "--pdeathsig", "KILL", *self.netns.exec_prefix(),
                "unshare", "--pid", "--fork", "--mount-proc", "--uts", "--kill-child",
                "sh", "-c", 'hostname "$0" && exec "$@"', self.hostname, *argv]

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
        self.proc = subprocess.Popen(self.command(*argv), stdout=self._log, stderr=subprocess.STDOUT,
                                     env=self.env(), cwd=str(self.folder))

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


def drop_schema(schema: str) -> None:
    with connect() as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def wait_for(predicate: Any, timeout: float, what: str) -> Any:
    return wait_until(predicate, timeout=timeout, what=what, interval=0.02)
