"""Worker slots and the start of worker processes.

A worker is forked by the template process (supervisor.forkserver) or, where there is none,
started with ``fork()`` then, in the child, ``setpgid`` and ``exec`` of ``python -m worker``.
Either way nothing of the supervisor (connections, threads, locks, signal handlers) survives
into the worker, which opens its own database connection.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING


from shared.model.exitcodes import ExitCode
from shared.runtime.processes import owner_token
from shared.execution.progress import clear_stopped, said_stopped
from shared.execution.progress import counts as progress_counts

if TYPE_CHECKING:
    import psutil


@dataclass
class Slot:
    """One worker position. ``pid`` is None while no process fills it."""

    index: int
    pid: int | None = None
    owner: str | None = None
    started: float = 0.0  # monotonic time of the last spawn
    failures: int = 0  # consecutive abnormal exits, for the restart back-off
    early_kills: int = 0  # consecutive SIGKILLs before the worker was ready
    next_start: float = 0.0  # monotonic time before which it is not respawned
    retiring: bool = False  # asked to exit (scale-down); not respawned
    kill_reason: str | None = None  # why the supervisor is stopping this worker
    count_attempt: bool = True  # does the interrupted job lose an attempt?
    killed: bool = False  # SIGKILL sent by the supervisor
    exit_by: float | None = (
        None  # monotonic time by which a worker that said it stopped must be gone
    )
    generation: int = 0  # the handler generation (template) it was started with
    forked: bool = False  # forked by the template (else exec'd)
    rolling: bool = False  # asked to exit for a new handler generation; replaced at once


def worker_args(slot: Slot, snapshot: str, supervisor_token: str) -> list[str]:
    """The ``python -m worker`` arguments of the worker of ``slot``."""
    return [
        "--snapshot",
        snapshot,
        "--slot",
        str(slot.index),
        "--parent-pid",
        str(os.getpid()),
        "--supervisor",
        supervisor_token,
        "--progress",
        progress_path(snapshot, slot),
    ]


def spawn(
    slot: Slot, snapshot: str, supervisor_token: str, now: float, reset_signals: tuple[int, ...]
) -> None:
    """Fork and exec a worker into ``slot``, configured by the ``snapshot`` file.
    The caller must hold no open database connection."""
    argv = [sys.executable, "-m", "worker", *worker_args(slot, snapshot, supervisor_token)]
    pid = os.fork()
    if pid == 0:  # child: only async-signal-safe-ish work until exec
        try:
            os.setpgid(0, 0)
            signal.set_wakeup_fd(-1)
            for s in reset_signals:
                signal.signal(s, signal.SIG_DFL)
            os.execv(sys.executable, argv)
        finally:
            os._exit(ExitCode.WORKER_BOOT_FAILED)
    try:
        os.setpgid(pid, pid)  # also here, so a kill of the group never races the child's setpgid
    except OSError:
        pass  # the child already exec'd (EACCES) or died (ESRCH)
    assign(slot, pid, now)
    slot.forked = False


def assign(slot: Slot, pid: int, now: float) -> None:
    """``slot`` is now filled by the new worker ``pid`` (our child), started at ``now``."""
    slot.pid = pid
    slot.owner = owner_token(pid)
    slot.started = now
    slot.kill_reason = None
    slot.killed = False
    slot.count_attempt = True
    slot.exit_by = None
    slot.rolling = False


def progress_path(snapshot: str, slot: Slot) -> str:
    """The batch progress file of ``slot`` (see shared.execution.progress), beside the config
    snapshot."""
    return os.path.join(os.path.dirname(snapshot), f"slot-{slot.index}.progress")


def lingering(slot: Slot, snapshot: str, now: float, grace: float) -> bool:
    """Has the worker in ``slot`` said it stopped (``shared.execution.progress``) at least ``grace``
    seconds ago and still not exited? Then only a SIGKILL ends it: a handler's thread or exit hook
    holds it, and its slot would never be refilled. Notes the deadline on the first sighting."""
    if slot.pid is None or slot.killed:
        return False
    if slot.exit_by is None:
        if not said_stopped(progress_path(snapshot, slot)):
            return False
        slot.exit_by = now + grace
    return now >= slot.exit_by


def describe_status(status: int) -> tuple[str, int | None, int | None]:
    """(human description, exit code, signal number) of a ``waitpid`` status."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = (
            signal.Signals(sig).name
            if sig in signal.Signals._value2member_map_
            else f"signal {sig}"
        )
        return f"killed by {name}", None, sig
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    return f"exited with {code} ({ExitCode.describe(code)})", code, None


def kill_group(pid: int, sig: int) -> None:
    """Send ``sig`` to the worker's process group (its handler's children too), or to the pid,
    and to the worker's descendants that left the group (a handler's child started in a new
    session): found before the worker dies, as they are lost to it once it has."""
    import psutil  # here: see shared.runtime.processes

    strays = _strays(pid)
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass
    for p in strays:
        try:
            p.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass


def _strays(pid: int) -> list[psutil.Process]:
    """Descendants of ``pid`` outside its process group."""
    import psutil

    try:
        kids = psutil.Process(pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    out = []
    for p in kids:
        try:
            if os.getpgid(p.pid) != pid:
                out.append(p)
        except (ProcessLookupError, PermissionError):
            pass
    return out


def worker_got_going(snapshot: str, slot: Slot) -> tuple[bool, bool]:
    """(ready, ran_jobs) of the slot's dead worker. Ready: it booted (opened the database and
    registered: it creates its progress file then; the file is removed at each death). Ran jobs:
    it completed some before its last claim, or started a second job of its batch."""
    path = progress_path(snapshot, slot)
    started, completed = progress_counts(path)
    return os.path.exists(path), completed > 0 or started > 1


class ProgressMarks:
    """Has a child claimed since the last look? Its progress file (written at each claim; its
    count, through a shared mapping, at each start) is stat'ed: no database, a ``stat`` per
    live child."""

    def __init__(self) -> None:
        self.last: dict[int, tuple[int, int, int] | None] = {}

    def changed(self, snapshot: str, slots: list[Slot]) -> bool:
        """Whether any of ``slots``' progress files changed (or the set of slots did)."""
        now = {s.index: _mark(progress_path(snapshot, s)) for s in slots}
        changed, self.last = now != self.last, now
        return changed


def _mark(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def forget_progress(snapshot: str, slot: Slot) -> None:
    """Remove the dead worker's progress file, and its word that it stopped: its successor
    starts from nothing."""
    try:
        os.unlink(progress_path(snapshot, slot))
    except OSError:
        pass
    clear_stopped(progress_path(snapshot, slot))


def restart_delay(failures: int, cap: float) -> float:
    """Back-off before respawning a slot after ``failures`` consecutive abnormal exits:
    0 s for the first, then 0.5, 1, 2, 4 ... capped at ``cap``."""
    if failures <= 1:
        return 0.0
    return min(0.5 * 2 ** (failures - 2), cap)
