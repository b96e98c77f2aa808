"""Process identity: owner tokens that survive pid reuse, and liveness checks (psutil)."""
from __future__ import annotations

import os
import socket

import psutil


def send_signal(pid: int | None, sig: int) -> bool:
    """Send ``sig`` to ``pid``; False (not an error) if there is no pid or it has exited."""
    if pid is None:
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def create_time_ms(pid: int) -> int | None:
    try:
        return int(round(psutil.Process(pid).create_time() * 1000))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def owner_token(pid: int) -> str:
    """``host:pid:create_time_ms``. The parent and the process itself compute the same token, and
    a later process that reuses the pid gets a different one."""
    return f"{socket.gethostname()}:{pid}:{create_time_ms(pid) or 0}"


def parse_token(token: str) -> tuple[str, int, int] | None:
    try:
        host, pid, created = token.rsplit(":", 2)
        return host, int(pid), int(created)
    except ValueError:
        return None


def token_alive(token: str) -> bool:
    """Is the process named by ``token`` still running (same pid *and* same create time)?

    A token from another host cannot be checked and counts as alive: its lease decides.
    """
    parsed = parse_token(token)
    if parsed is None:
        return False
    host, pid, created = parsed
    if host != socket.gethostname():
        return True
    now_created = create_time_ms(pid)
    if now_created is None:
        return False
    try:
        if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return False
    except psutil.Error:
        return False
    return abs(now_created - created) <= 20  # create_time has clock-tick (10 ms) resolution


def rss_mb(pid: int) -> float:
    try:
        return psutil.Process(pid).memory_info().rss / (1 << 20)
    except psutil.Error:
        return 0.0
