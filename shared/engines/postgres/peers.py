"""Which sockets of this process lead to the PostgreSQL server: what the worker template checks
before it forks (a handler module must not have connected at import; see shared.engines.forkaware)."""

from __future__ import annotations

import os
from typing import Any

from .. import forkaware

DEFAULT_PORT = 5432


def connections(url: str) -> list[str]:
    """``"fd N: a connection to the database server at PEER"`` for each socket of this process
    whose peer is a server ``url`` may connect to (by port: the host may be a name)."""
    ports = server_ports(url)
    return forkaware.socket_handles(
        lambda peer: is_server(peer, ports), "a connection to the database server at"
    )


def server_ports(url: str) -> set[int]:
    """The ports a PostgreSQL URL connects to (its hosts' ports, ``PGPORT``, or 5432)."""
    ports: set[int] = set()
    try:
        from psycopg.conninfo import conninfo_to_dict

        given = str(conninfo_to_dict(url).get("port") or "")
    except Exception:  # noqa: BLE001 - no driver, or a URL it refuses: the default port
        given = ""
    for part in (given or os.environ.get("PGPORT", "")).split(","):
        if part.strip().isdigit():
            ports.add(int(part))
    return ports or {DEFAULT_PORT}


def is_server(peer: Any, ports: set[int]) -> bool:
    """A PostgreSQL server's address: a TCP peer on one of ``ports``, or a unix socket named
    ``.s.PGSQL.<port>`` (the server's socket file, in whatever folder)."""
    if isinstance(peer, tuple):
        return len(peer) >= 2 and peer[1] in ports
    if isinstance(peer, bytes):
        peer = peer.decode("utf-8", "replace")
    name = os.path.basename(str(peer))
    return any(name == f".s.PGSQL.{p}" for p in ports)
