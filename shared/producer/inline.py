"""Running jobs in the calling process, for users' tests: ``JobQueue(immediate=True)`` and
``JobQueue.drain()`` (like Huey's immediate mode, Celery's eager mode, Oban's ``drain_queue``
and Sidekiq's ``drain``).

The jobs go through the worker's own code: claimed with the worker's guarded claim (honouring
pause and ``[types]`` limits), run by :func:`shared.execution.runner.execute`, their outcome decided
by :func:`shared.execution.outcomes.decide` (retries, back-off, ``PermanentError``, ``RetryAfter``,
``max_attempts``), recorded with the guarded finish, then logged and the hooks run after the
commit. What a worker process adds is not here: the hard timeout (the supervisor kills a worker
that overruns; a handler run inline is never interrupted), heartbeats, batching and recycling.
"""

from __future__ import annotations

import os
import time
from types import ModuleType
from typing import Any, Callable, Iterable, Sequence

from shared.settings.config import Config
from shared.execution.handlers import ATTR, HOOK_ATTR, HandlerSpec, Registry, load_registry
from shared.model.limits import type_limits
from shared.execution.outcomes import after_commit, decide
from shared.execution.policy import JobPolicy
from shared.runtime.processes import owner_token
from shared.execution.runner import JobContext, execute
from shared.telemetry.tracing import Tracing
from shared.engines.contract import EngineStore

OUTCOMES = ("completed", "retried", "failed")
# "cancelled": a handler raised JobCancelled (a key of drain()'s counts only when some were)
_KIND = {"completed": "completed", "retry": "retried", "failed": "failed", "cancelled": "cancelled"}

Handlers = Iterable["str | ModuleType | Callable[..., Any]"]


def registry_of(items: Handlers) -> Registry:
    """A registry of modules (or their names) and ``@handler`` / hook functions, plus the
    built-in job types. Raises :class:`shared.execution.handlers.HandlerImportError` for a module
    that does not import, TypeError for anything that is none of these."""
    items = list(items)
    names = [i for i in items if isinstance(i, str)]
    registry = load_registry(names)
    for item in items:
        if isinstance(item, str):
            continue
        if isinstance(item, ModuleType):
            registry.add_module(item)
        elif isinstance(getattr(item, ATTR, None), HandlerSpec) or getattr(item, HOOK_ATTR, None):
            registry.add_module(_Holder(item))  # type: ignore[arg-type]
        else:
            raise TypeError(
                f"handlers: expected module names, modules or @handler functions, got {item!r}"
            )
    return registry


class _Holder:
    """Looks like a module holding one function, for :meth:`Registry.add_module`."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn


class InlineRunner:
    """Claims and runs due jobs of ``store`` one at a time in this process."""

    def __init__(self, store: EngineStore, config: Config, registry: Registry, clock: Any) -> None:
        self.store, self.config, self.registry, self.clock = store, config, registry, clock
        self.policy = JobPolicy(config, registry)
        self.pid = os.getpid()
        self.owner = owner_token(self.pid)
        self.tracing = Tracing()  # this runner's tracer and instruments (shared.telemetry.tracing)

    def drain(
        self,
        types: Sequence[str] | None = None,
        max_jobs: int | None = None,
        ids: Sequence[str] | None = None,
    ) -> dict[str, int]:
        """Run due jobs (of ``types``, or with ``ids``, if given) until none is due or
        ``max_jobs`` have run; counts by outcome: completed, retried, failed (and cancelled if a
        handler raised JobCancelled, lease_lost if a supervisor took a job back meanwhile)."""
        if max_jobs is not None and (not isinstance(max_jobs, int) or max_jobs < 0):
            raise ValueError(f"max_jobs must be an integer >= 0 or None, got {max_jobs!r}")
        if isinstance(types, str):
            types = [types]
        counts = dict.fromkeys(OUTCOMES, 0)
        limits = type_limits(self.config)
        while max_jobs is None or sum(counts.values()) < max_jobs:
            jobs = self.store.claim_limited(
                self.owner, self.pid, self.clock.now, limits, 1, types=types, ids=ids
            )
            if not jobs:
                break
            kind = self.run(jobs[0])
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def run(self, job: Any) -> str:
        """Run one claimed job and record its outcome as the worker does; the outcome's name."""
        ctx = JobContext(job.id, job.type, job.attempts, self.policy.max_attempts(job), job.queue)
        ctx.config, ctx.store = self.config, self.store
        ctx.check_in = CheckIn(self.store, self.owner, ctx)
        t0 = time.perf_counter()
        outcome = execute(self.registry, job, ctx, self.tracing)
        done = decide(job, ctx, outcome, self.policy, self.clock.now(), time.perf_counter() - t0)
        [ok], _ = self.store.finish_and_claim(
            [done.finish], self.owner, self.pid, self.clock.now(), 0
        )
        after_commit(done, ok, self.registry, None, self.pid)
        return _KIND[done.finish.kind] if ok else "lease_lost"


class CheckIn:
    """An inline job's check-in, a worker heartbeat's part for it: called when its handler
    reports progress or checks for a cancel, at most every ``EVERY`` seconds it stores the last
    progress and reads whether a cancel was requested (``q.cancel(id)`` from another thread or
    process, or from the handler itself), so both can be tested with drain() and immediate mode."""

    EVERY = 0.05

    def __init__(self, store: EngineStore, owner: str, ctx: JobContext) -> None:
        self.store, self.owner, self.ctx = store, owner, ctx
        self.last = -self.EVERY

    def __call__(self) -> None:
        now = time.monotonic()
        if now - self.last < self.EVERY or self.ctx.cancel_requested:
            return
        self.last, ctx = now, self.ctx
        progress = [] if ctx.reported is None else [(ctx.id, ctx.attempt, ctx.reported)]
        if ctx.id in self.store.check_in(self.owner, progress):
            ctx.cancel_requested = True


def load(handlers: Handlers | None, config: Config) -> Registry:
    """The registry the in-process runner uses: ``handlers``, else the config's modules."""
    if handlers is None:
        return load_registry(config.handlers, config.path or None)
    return registry_of(handlers)
