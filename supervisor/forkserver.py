"""The supervisor's side of the template process (the fork server; its side is worker.forkserver).

The first template is forked from the supervisor at boot, before the supervisor opens the
database, imports a handler module or starts anything: it inherits only the modules imported so
far (jobq's own, psutil, the engine's modules and driver) and, in the child, closes every file
descriptor but stdio and its two pipes, then imports the worker code and the handler modules
while the supervisor opens the database. A template started later (after
it died, or a reload changed ``handlers``) is exec'd as ``python -m worker --fork-server``, so
it imports the handler modules afresh and inherits nothing at all.

Workers forked by the template are re-parented to the supervisor (a child subreaper), which
reaps them, reads their exit codes and signals them exactly as before. Where that is impossible
(no subreaper outside Linux, ``JOBQ_FORK_SERVER=0``, or a template that says it cannot fork
safely) the supervisor starts each worker with exec of ``python -m worker`` (children.spawn).

``TemplateFailed`` means the handler modules failed to import in the template (the supervisor
halts with BOOT_FAILED at boot); ``TemplateGone`` that the template died, hung or refused.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import threading
import time

from shared.model.exitcodes import ExitCode
from shared.runtime.processes import set_process_name

READY_TIMEOUT = 60.0  # seconds the template may take to import the handler modules
REPLY_TIMEOUT = 5.0  # seconds for one worker's fork once the template is ready
STARTING, READY, DEAD = "starting", "ready", "dead"
ENV_SWITCH = "JOBQ_FORK_SERVER"  # "0": no template; every worker is a fresh `python -m worker`


class TemplateGone(RuntimeError):
    """The template died, hung, or cannot fork safely; ``str()`` says which."""


class TemplateUnsafe(TemplateGone):
    """The template cannot fork safely (a thread or the database open after its imports)."""


class TemplateFailed(RuntimeError):
    """A handler module failed to import in the template: ``str()`` says which and why in one
    line; ``traceback`` is the import's traceback."""

    def __init__(self, summary: str, tb: str = "") -> None:
        super().__init__(summary)
        self.traceback = tb


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


class ForkServer:
    """One template process: its pid, its pipes, and whether it is ready."""

    def __init__(self, pid: int, req: int, resp: int, how: str) -> None:
        self.pid = pid
        self.req = req  # we write requests here
        self.resp = resp  # and read replies here
        self.how = how  # "fork" or "exec"
        self.state = STARTING
        self.started = time.monotonic()
        self.types = 0
        self._buf = b""
        self._next = 0
        self.reaped: str | None = None  # how it ended, once the supervisor reaped it

    # -- starting -------------------------------------------------------------------------------

    @classmethod
    def fork(
        cls,
        handlers: tuple[str, ...],
        database: str,
        source: str | None = None,
        async_types: bool | None = None,
    ) -> "ForkServer":
        """Fork the template from this process (``source``: the config file naming ``handlers``).
        Call before opening the database or starting a thread (raises RuntimeError if a thread
        runs: it would not cross, but its locks would)."""
        if threading.active_count() > 1:
            raise RuntimeError(f"threads are running: {threading.enumerate()}")
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                set_process_name("jobq-template")  # at once: `ps` shows which child it is
                os.setpgid(0, 0)  # Ctrl-C and kills of the supervisor's group are not for it
                _close_all_but(0, 1, 2, req_r, resp_w)
                importlib.import_module("worker.forkserver").serve(
                    req_r, resp_w, tuple(handlers), database, parent, source, async_types
                )
            finally:
                os._exit(ExitCode.ERROR)
        os.close(req_r)
        os.close(resp_w)
        return cls(pid, req_w, resp_r, "fork")

    @classmethod
    def exec(cls, snapshot: str) -> "ForkServer":
        """Start a fresh template: fork and exec ``python -m worker --fork-server``; it reads the
        handler modules and the database from the config ``snapshot``."""
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        argv = [
            sys.executable,
            "-m",
            "worker",
            "--fork-server",
            f"{req_r},{resp_w}",
            "--snapshot",
            snapshot,
        ]
        pid = os.fork()
        if pid == 0:
            try:
                os.setpgid(0, 0)
                signal.set_wakeup_fd(-1)
                os.set_inheritable(req_r, True)
                os.set_inheritable(resp_w, True)
                _close_all_but(0, 1, 2, req_r, resp_w)
                os.execv(sys.executable, argv)
            finally:
                os._exit(ExitCode.WORKER_BOOT_FAILED)
        os.close(req_r)
        os.close(resp_w)
        return cls(pid, req_w, resp_r, "exec")

    # -- talking to it --------------------------------------------------------------------------

    def fileno(self) -> int:
        """Readable when the template has something to say (waited on while it starts)."""
        return self.resp

    def poll_ready(self, block: float = 0.0) -> bool:
        """Read the template's first message if it came (waiting up to ``block`` seconds).
        True once ready; raises TemplateFailed / TemplateGone."""
        if self.state == READY:
            return True
        if self.state == DEAD:
            raise TemplateGone("the template is gone")
        left = READY_TIMEOUT - (time.monotonic() - self.started)
        if left <= 0:
            self.close()
            raise TemplateGone(f"the template did not get ready within {READY_TIMEOUT:g} s")
        msg = self._read(min(block, left))
        if msg is None:
            return False
        if "ready" in msg:
            self.state, self.types = READY, int(msg["ready"])
            return True
        self.close()
        if "failed" in msg:
            raise TemplateFailed(msg["failed"], msg.get("traceback", ""))
        if "unsafe" in msg:
            raise TemplateUnsafe(msg["unsafe"])
        raise TemplateGone(f"unexpected message {msg!r}")

    def spawn(self, argvs: list[list[str]]) -> list[int | str]:
        """Fork one worker per ``argvs`` entry (``python -m worker ARGV``), all requested at once;
        returns, in order, each worker's pid (our child once its go-between exited, which
        happens before the worker does anything) or why that one failed. Raises TemplateGone
        (the template is unusable) with the pids of the workers forked so far in ``.pids``."""
        if not self.poll_ready(block=READY_TIMEOUT):
            raise TemplateGone("the template is not ready")
        self._next += len(argvs)
        ids = list(range(self._next - len(argvs), self._next))
        data = "".join(json.dumps({"id": i, "argv": a}) + "\n" for i, a in zip(ids, argvs)).encode()
        out: dict[int, int | str] = {}
        try:
            try:
                while data:
                    data = data[os.write(self.req, data) :]
            except OSError as exc:  # EPIPE: it died
                self.close()
                raise TemplateGone(f"the template is gone ({exc})") from None
            deadline = time.monotonic() + REPLY_TIMEOUT
            while len(out) < len(ids):
                msg = self._read(max(deadline - time.monotonic(), 0.0))
                if msg is None:
                    self.close()
                    raise TemplateGone(
                        f"the template did not fork a worker within {REPLY_TIMEOUT:g} s"
                    )
                if "unsafe" in msg:
                    self.close()
                    raise TemplateUnsafe(msg["unsafe"])
                if msg.get("id") in ids:
                    out[msg["id"]] = int(msg["pid"]) if "pid" in msg else str(msg.get("error"))
        except TemplateGone as exc:
            exc.done = {k: out[i] for k, i in enumerate(ids) if isinstance(out.get(i), int)}  # type: ignore[attr-defined]
            raise
        return [out[i] for i in ids]

    def _read(self, timeout: float) -> dict | None:
        """One message, waiting up to ``timeout``; None on timeout. EOF raises TemplateGone."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            ready, _, _ = select.select([self.resp], [], [], max(deadline - time.monotonic(), 0.0))
            if not ready:
                return None
            chunk = os.read(self.resp, 65536)
            if not chunk:
                self.close()
                raise TemplateGone("the template exited")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        """Close our pipe ends: the template exits (EOF). The caller reaps it (``waitpid``)."""
        if self.state == DEAD:
            return
        self.state = DEAD
        for fd in (self.req, self.resp):
            try:
                os.close(fd)
            except OSError:
                pass

    def stop(self, grace: float = 2.0) -> None:
        """Close, wait up to ``grace`` for the template to exit, then kill it; reap it."""
        self.close()
        deadline = time.monotonic() + grace
        try:
            while os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                if time.monotonic() >= deadline:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    return
                time.sleep(0.005)
        except (ChildProcessError, ProcessLookupError):
            pass  # already reaped


def _close_all_but(*keep: int) -> None:
    """Close every inherited file descriptor except ``keep`` (in a freshly forked child)."""
    top = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 4096
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, min(top, 65536)))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
