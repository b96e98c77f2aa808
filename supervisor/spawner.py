"""How the supervisor starts workers: from the template process while there is a usable one,
else by exec of ``python -m worker``; and what it does when the template dies or the handler
modules change.

- Boot: ``begin`` (first thing, before the database or any thread) makes the supervisor a child
  subreaper and forks the first template; ``after_boot`` starts one by exec if that could not
  be done. A handler module that fails to import in the template halts start-up with
  BOOT_FAILED and its traceback (``check``), never a crash loop.
- The template dies (or hangs): the supervisor logs ``template.died`` and starts a new one by
  exec (``action=restart``), unless it died RESTART_LIMIT times within RESTART_WINDOW seconds, or
  refuses to fork safely: then it starts workers by exec from then on (``action=fallback``).
- A reload changes ``handlers``: ``renew`` starts a new template (a new *generation*); the
  arbiter rolls the workers of older generations onto it (SIGTERM: each finishes its job).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections import deque
from typing import Callable

from shared.engines import preload, target
from shared.model.errors import StoreUnavailable
from shared.runtime import logs
from shared.runtime.logs import event, get_logger
from shared.runtime.processes import set_child_subreaper

from . import forkserver
from .children import Slot, assign, spawn, worker_args
from .forkserver import READY, STARTING, ForkServer, TemplateFailed, TemplateGone, TemplateUnsafe

log = get_logger("supervisor")

RESTART_LIMIT = 3  # template deaths within RESTART_WINDOW before falling back to exec
RESTART_WINDOW = 60.0


class Spawner:
    """The template (if any), its generation, and the fallback state."""

    def __init__(self) -> None:
        self.server: ForkServer | None = None
        self.generation = 0
        self.off_reason: str | None = None  # why workers are exec'd (None: template in use)
        self.deaths: deque[float] = deque()
        self.retired: dict[int, ForkServer] = {}  # old templates, until reaped
        self.booting = True  # no template was ever ready yet
        self.begun = False  # begin() was called
        self.snapshot = ""

    # -- boot -----------------------------------------------------------------------------------

    def begin(
        self,
        handlers: tuple[str, ...],
        database: str,
        source: str | None = None,
        log: tuple[str, str] | None = None,
        async_types: bool | None = None,
    ) -> None:
        """Fork the first template (``source``: the config file naming ``handlers``). Call before
        opening the database or starting a thread. The engine's modules (jobq's own and its
        driver, which start nothing at import) are imported first: this process needs them
        anyway, and the template inherits them instead of importing them a second time on the
        same cores. ``log``: the (level, format) to set the logs up with first, so
        the template inherits that too (None: the caller did). ``async_types``: the config gives
        some type an ``async_concurrency`` (the template then preloads the async runner)."""
        self.begun = True
        if log is not None:
            logs.setup(*log)
        try:
            preload(target(database))
        except StoreUnavailable:
            pass  # a value no engine takes: opening the database says so
        if not forkserver.enabled():
            self.off(f"{forkserver.ENV_SWITCH}=0")
        elif not set_child_subreaper(True):
            self.off("this system cannot make the supervisor a child subreaper (Linux only)")
        else:
            try:
                self.server = ForkServer.fork(handlers, database, source, async_types)
            except (RuntimeError, OSError) as exc:
                event(
                    log,
                    "template.fork_skipped",
                    logging.INFO,
                    reason=str(exc),
                    note="starting it by exec",
                )

    def after_boot(self, snapshot: str) -> None:
        """The config snapshot exists: start the template by exec if it was not forked."""
        self.snapshot = snapshot
        if self.server is None and self.off_reason is None:
            self._start_exec()

    def check(self, wait: float = 0.0) -> None:
        """Read the template's news (waiting up to ``wait`` seconds for it while it starts).
        Raises TemplateFailed if its handler modules failed to import before any template was
        ever ready (the supervisor halts, BOOT_FAILED); later failures are logged and handled here."""
        server = self.server
        if server is None or server.state == READY:
            return
        try:
            if server.poll_ready(wait):
                self.booting = False
                event(
                    log,
                    "template.ready",
                    pid=server.pid,
                    how=server.how,
                    types=server.types,
                    generation=self.generation,
                )
        except TemplateFailed as exc:
            if self.booting:
                self.server = None
                if server.reaped is None:
                    self.retired[server.pid] = server  # reaped by the loop
                raise
            self._lost(server, str(exc), restart=False)
        except TemplateGone as exc:  # a template that cannot fork safely will not on a restart
            self._lost(server, str(exc), restart=not isinstance(exc, TemplateUnsafe))

    # -- starting workers -----------------------------------------------------------------------

    def waiting(self) -> bool:
        """Is a template starting (spawns wait for it)?"""
        return self.server is not None and self.server.state == STARTING

    def fds(self) -> list[int]:
        """File descriptors the supervisor loop waits on (a starting template's reply)."""
        return [self.server.fileno()] if self.waiting() else []

    def start(
        self,
        slots: list[Slot],
        token: str,
        now: float,
        reset_signals: tuple[int, ...],
        before_exec: Callable[[], None] = lambda: None,
    ) -> None:
        """Fill ``slots`` with new workers: forked by the template (all requested at once), or
        exec'd where there is no usable template (``before_exec`` is called first: this process
        forks then, and must hold no database connection)."""
        server = self.server
        results: list[int | str | None] = [None] * len(slots)
        if server is not None and server.state == READY and slots:
            try:
                results = list(server.spawn([worker_args(s, self.snapshot, token) for s in slots]))
            except TemplateGone as exc:
                done = getattr(exc, "done", {})
                results = [done.get(k) for k in range(len(slots))]
                before_exec()  # a new template is started by exec: a fork here
                self._lost(server, str(exc), restart=not isinstance(exc, TemplateUnsafe))
        for slot, pid in zip(slots, results):
            if isinstance(pid, int):
                assign(slot, pid, now)
                slot.forked = True
            else:
                if isinstance(pid, str):
                    event(
                        log,
                        "template.spawn_failed",
                        logging.WARNING,
                        slot=slot.index,
                        error=pid,
                        note="starting this worker by exec",
                    )
                before_exec()
                spawn(slot, self.snapshot, token, now, reset_signals)
            slot.generation = self.generation

    def renew(self) -> None:
        """The handler modules changed: a new template (by exec: it imports them afresh)."""
        self.generation += 1
        if self.server is not None:
            self._retire(self.server)
            self.server = None
        if self.off_reason is None:
            self._start_exec()

    # -- deaths ---------------------------------------------------------------------------------

    def owns(self, pid: int) -> bool:
        return (self.server is not None and self.server.pid == pid) or pid in self.retired

    def on_exit(self, pid: int, how: str) -> None:
        """A template process was reaped (``how``: describe_status text)."""
        old = self.retired.pop(pid, None)
        if old is not None:
            event(log, "template.exited", logging.DEBUG, pid=pid, how=how)
            return
        server = self.server
        if server is not None and server.pid == pid:
            server.reaped = how
            if server.state == STARTING:
                return  # its last words (why it could not start) are in its pipe: see check()
            self.server = None
            server.close()
            self._lost(server, f"template {pid} {how}")

    def _lost(self, server: ForkServer, why: str, *, restart: bool = True) -> None:
        """The current template is unusable: restart it, or fall back to exec, and say which."""
        if self.server is server:
            self.server = None
        if server.reaped is None:
            self._retire(server, kill=True)  # hung or refusing: it may not read its EOF
        else:
            server.close()
            if "exited" in why and server.reaped not in why:
                why = f"{why} ({server.reaped})"
        now = time.monotonic()
        self.deaths.append(now)
        while self.deaths and now - self.deaths[0] > RESTART_WINDOW:
            self.deaths.popleft()
        if restart and len(self.deaths) < RESTART_LIMIT:
            event(
                log, "template.died", logging.WARNING, pid=server.pid, error=why, action="restart"
            )
            self._start_exec()
        else:
            event(
                log,
                "template.died",
                logging.ERROR,
                pid=server.pid,
                error=why,
                action="fallback",
                note="workers are started by exec of python -m worker from now on",
            )
            self.off(why)

    def off(self, reason: str) -> None:
        self.off_reason = reason
        event(log, "template.off", logging.INFO, reason=reason)

    def _start_exec(self) -> None:
        try:
            self.server = ForkServer.exec(self.snapshot)
        except OSError as exc:
            self.off(f"cannot start the template: {exc}")

    def _retire(self, server: ForkServer, kill: bool = False) -> None:
        server.close()  # it exits on EOF; reaped by the loop (owns/on_exit)
        if kill:
            try:
                os.kill(server.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.retired[server.pid] = server

    # -- the end --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every template and reap it; stop being a subreaper."""
        for server in [*self.retired.values(), *([self.server] if self.server else [])]:
            server.stop()
        self.retired.clear()
        self.server = None
        set_child_subreaper(False)
