"""Which job types run many at once on a worker's event loop: ``async_concurrency``.

A type's value comes from its handler (``@handler(..., async_concurrency=N)`` or
``@task(async_concurrency=N)``), else from ``[types."<type>"] async_concurrency``. Only an
``async def`` handler can have one: a plain function would block the loop that runs its siblings.

The worker (``worker.aio``) runs these types' jobs as tasks of one event loop, each one's timeout
cancelling its task only; the supervisor (``supervisor.maintenance``) gives such a worker the
job's timeout plus ``kill_grace`` before it kills it: past that the loop itself is blocked.
"""

from __future__ import annotations

from typing import Any

from shared.execution.handlers import Registry


class AsyncConfigError(ValueError):
    """``async_concurrency`` set for a type whose handler is not ``async def``."""


def async_limits_of(config: Any, registry: Registry) -> bool:
    """Does ``config`` or a handler of ``registry`` give some type an ``async_concurrency``? (A
    worker imports its async runner, and asyncio with it, only then: see ``worker.loop``.)"""
    return config_async(config) or any(registry.get(t).async_concurrency for t in registry.types())


def config_async(config: Any) -> bool:
    """Does ``config`` itself (``[types]``) give some type an ``async_concurrency``?"""
    return any(t.async_concurrency for t in config.types.values())


def async_limits(config: Any, registry: Registry) -> dict[str, int]:
    """Job type -> how many of its jobs one worker runs at once (only the types that have a
    value). Raises :class:`AsyncConfigError` naming the type and its handler when a type whose
    handler is a plain function has one; a type no handler of ``registry`` serves keeps the
    config's value (another deployment's workers may serve it)."""
    out: dict[str, int] = {}
    for name, typed in config.types.items():
        n = getattr(typed, "async_concurrency", None)
        if n is not None:
            out[name] = n
    for name in registry.types():
        spec = registry.get(name)
        if spec is not None and spec.async_concurrency is not None:
            out[name] = spec.async_concurrency
    for name in out:
        spec = registry.get(name)
        if spec is not None and not spec.is_async:
            where = (
                f"{getattr(spec.fn, '__module__', '?')}.{getattr(spec.fn, '__qualname__', spec.fn)}"
            )
            raise AsyncConfigError(
                f'[types."{name}"] async_concurrency = {out[name]}: the handler of job '
                f"type {name!r} ({where}) is not an async def function; only async "
                f"handlers can run many at once on a worker's event loop"
            )
    return out
