"""A PgBouncer of the test's own, in transaction pooling, in front of the test server.

:class:`PgBouncer` writes its config in a folder of its own, runs ``pgbouncer`` in the
foreground as a child of the test (never as a system service; as the ``postgres`` user when the
test runs as root, which PgBouncer refuses to be), waits until it accepts connections and stops
it on ``close()``. Every database name passes through to the server (``* =``), so a URL through
it is the server's with the bouncer's port. ``max_db_connections`` caps the server connections it
opens; :meth:`server_connections` reads how many it holds now from its admin console.

Install: ``apt-get install -y pgbouncer`` (Debian's 1.18, what .ci/run installs).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.proc import wait_until

BINARIES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")


def binary() -> str | None:
    """The pgbouncer program, or None where it is not installed."""
    return shutil.which("pgbouncer") or next((b for b in BINARIES if os.path.exists(b)), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgBouncer:
    """PgBouncer on 127.0.0.1:``port`` in ``pool_mode`` with at most ``pool_size`` server
    connections, forwarding to the server's local socket as ``user`` (trust)."""

    def __init__(
        self,
        pool_size: int = 10,
        pool_mode: str = "transaction",
        user: str | None = None,
        idle_transaction_timeout: float = 0,
        server_socket: str = "/var/run/postgresql",
    ) -> None:
        program = binary()
        if program is None:
            raise RuntimeError("pgbouncer is not installed (apt-get install -y pgbouncer)")
        self.user = user or os.environ.get("PGUSER") or "root"
        self.port = _free_port()
        # a folder the postgres user can read (the test's tmp_path is root's alone)
        self.folder = Path(tempfile.mkdtemp(prefix="jobq-pgbouncer-"))
        self.folder.chmod(0o755)
        users = self.folder / "users.txt"
        users.write_text(f'"{self.user}" ""\n')
        ini = self.folder / "pgbouncer.ini"
        ini.write_text(
            "[databases]\n"
            f"* = host={server_socket} port=5432\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {users}\n"
            f"admin_users = {self.user}\n"
            f"pool_mode = {pool_mode}\n"
            "max_client_conn = 2000\n"
            f"default_pool_size = {pool_size}\n"
            f"max_db_connections = {pool_size}\n"
            f"idle_transaction_timeout = {idle_transaction_timeout:g}\n"
            "logfile =\n"
            "syslog = 0\n"
        )
        for f in (users, ini):
            f.chmod(0o644)
        self.log_path = self.folder / "pgbouncer.log"
        argv = [program, *(["-u", "postgres"] if os.geteuid() == 0 else []), str(ini)]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(self._accepts, timeout=10, what=f"pgbouncer on port {self.port}")
        except BaseException:
            self.close()
            raise

    def url(self, database: str = "test") -> str:
        """A URL through this bouncer to ``database`` of the server."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def _accepts(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"pgbouncer exited {self.proc.returncode}: {self.log()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        except OSError:
            return False
        return True

    def admin(self, command: str) -> list[dict[str, Any]]:
        """A ``SHOW ...`` of the admin console, as rows."""
        import psycopg
        from psycopg.rows import dict_row

        url = f"host=127.0.0.1 port={self.port} dbname=pgbouncer user={self.user}"
        with psycopg.connect(url, autocommit=True, row_factory=dict_row) as c:
            return list(c.execute(command).fetchall())

    def server_connections(self) -> int:
        """The server connections this bouncer holds now (every pool's, any state)."""
        states = ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login")
        return sum(
            sum(int(row[k]) for k in states)
            for row in self.admin("SHOW POOLS")
            if row["database"] != "pgbouncer"
        )

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)
