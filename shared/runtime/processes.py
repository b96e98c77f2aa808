"""Process identity: owner tokens that survive pid reuse, and liveness checks.

A process's start time and state are read from ``/proc/PID/stat`` where there is one (Linux),
the way psutil reads them (the same arithmetic: tokens do not depend on which was used), and
from psutil elsewhere. psutil itself is imported by the functions that need it: every worker
takes its token before its first job, and the ~8 ms of psutil's import was on the way to that
job in the supervisor, before its template's fork, for the workers' sake only.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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
    """When ``pid`` started (ms since the epoch, clock-tick resolution); None: no such process
    (or not one this process may see)."""
    stat = _proc_stat(pid)
    if stat is not None:
        return None if stat == _GONE else int(round(stat[1] * 1000))
    import psutil

    try:
        return int(round(psutil.Process(pid).create_time() * 1000))
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


_GONE = ("", 0.0)  # _proc_stat: the process does not exist


def _proc_stat(pid: int) -> tuple[str, float] | None:
    """``(state letter, start time in seconds since the epoch)`` of ``pid`` from /proc, as
    psutil computes them on Linux (start ticks / CLK_TCK + the boot time); ``_GONE`` if there
    is no such process; None where /proc does not tell (ask psutil)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            data = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return _GONE if os.path.isdir("/proc/self") else None
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()  # after the name, which may hold anything
    boot = _boot_time()
    if len(fields) < 20 or boot is None:
        return None
    return fields[0].decode("ascii", "replace"), float(fields[19]) / _CLOCK_TICKS + boot


def _boot_time() -> float | None:
    """The boot time (``btime`` of /proc/stat, in seconds since the epoch), as psutil reads it."""
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime"):
                    return float(line.strip().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _read_first_line(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.readline().strip()
    except OSError:
        return ""


def host_id() -> str:
    """This host's identity in owner tokens and process rows: ``hostname/boot/pidns``.

    ``boot`` is the first 12 hex digits of the kernel's boot id (a reboot is another host: its
    pids start over), ``pidns`` the inode of our pid namespace (two pid namespaces on one
    machine see different pids, so each is a host of its own: tests run two "hosts" that way).
    A part this platform does not give is left out (then just the hostname, as before). Never
    contains ':' (tokens are split on it). Read afresh on each call: a few bytes from /proc."""
    parts = [socket.gethostname().replace(":", "_")]
    boot = _read_first_line("/proc/sys/kernel/random/boot_id").replace("-", "")[:12]
    if boot:
        parts.append(boot)
    try:
        ns = os.readlink("/proc/self/ns/pid")  # 'pid:[4026531836]'
    except OSError:
        ns = ""
    digits = "".join(ch for ch in ns if ch.isdigit())
    if digits:
        parts.append(digits)
    return "/".join(parts)


def owner_token(pid: int, host: str | None = None) -> str:
    """``host:pid:create_time_ms`` (host: :func:`host_id`). The parent and the process itself
    compute the same token (they share the host and pid namespace), and a later process that
    reuses the pid gets a different one."""
    return f"{host or host_id()}:{pid}:{create_time_ms(pid) or 0}"


def token_host(token: str) -> str | None:
    """The host part of an owner token (None if it is not one)."""
    parsed = parse_token(token)
    return None if parsed is None else parsed[0]


def parse_token(token: str) -> tuple[str, int, int] | None:
    try:
        host, pid, created = token.rsplit(":", 2)
        return host, int(pid), int(created)
    except ValueError:
        return None


def token_alive(token: str, here: str | None = None) -> bool:
    """Is the process named by ``token`` still running (same pid *and* same create time)?

    A token from another host (``here``: :func:`host_id`, computed if not given) cannot be
    checked and counts as alive: its lease decides.
    """
    parsed = parse_token(token)
    if parsed is None:
        return False
    host, pid, created = parsed
    if host != (here or host_id()):
        return True
    now_created = create_time_ms(pid)
    if now_created is None or _zombie(pid):
        return False
    return abs(now_created - created) <= 20  # create_time has clock-tick (10 ms) resolution


def _zombie(pid: int) -> bool:
    """Has ``pid`` exited (a zombie not reaped yet, or gone)?"""
    stat = _proc_stat(pid)
    if stat is not None:
        return stat == _GONE or stat[0] == "Z"
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def rss_mb(pid: int) -> float:
    import psutil

    try:
        return psutil.Process(pid).memory_info().rss / (1 << 20)
    except psutil.Error:
        return 0.0


def memory_mb(pid: int) -> dict[str, float] | None:
    """Resident (RSS), unique (USS: freed if the process exits) and proportional (PSS: shared
    pages divided among their sharers) memory of ``pid``, in MiB; None if it cannot be read.
    USS and PSS come from /proc/PID/smaps (psutil ``memory_full_info``) and are None where the
    platform or permissions do not give them. A worker forked from the template shares most of
    its pages, so its USS is well below its RSS."""
    import psutil

    try:
        proc = psutil.Process(pid)
        rss = proc.memory_info().rss
    except psutil.Error:
        return None
    out: dict[str, float] = {"rss_mb": round(rss / (1 << 20), 1), "uss_mb": None, "pss_mb": None}  # type: ignore[dict-item]
    try:
        full = proc.memory_full_info()
        out["uss_mb"] = round(full.uss / (1 << 20), 1)
        pss = getattr(full, "pss", None)
        out["pss_mb"] = None if pss is None else round(pss / (1 << 20), 1)  # type: ignore[assignment]
    except (psutil.Error, AttributeError, OSError):
        pass
    return out


# -- Linux process controls (prctl), used by the fork server --------------------------------------

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, arg: int | bytes) -> bool:
    """Call prctl(2); False where there is none (not Linux) or it refused."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def set_child_subreaper(on: bool = True) -> bool:
    """Make this process the reaper of its orphaned descendants (Linux >= 3.4): a worker whose
    go-between parent exits is then re-parented to us, so we ``waitpid`` it and read its exit
    code as if we had forked it. Returns False where this is not available."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0)


def set_parent_death_signal(sig: int) -> bool:
    """Have the kernel send ``sig`` to this process when its parent dies (Linux)."""
    return _prctl(PR_SET_PDEATHSIG, sig)


def set_process_name(name: str) -> bool:
    """Set the name ``ps -o comm``, ``top`` and psutil's ``name()`` show (15 bytes, Linux)."""
    return _prctl(PR_SET_NAME, name.encode()[:15])
