"""The class decorator both engines use to turn their driver's errors into jobq's own."""

from __future__ import annotations

import inspect
from typing import Any, Callable


# Private methods that are guarded all the same: a step of a public method that is not (see
# :func:`unguarded`).
GUARDED_PRIVATE = ("_paced",)


def unguarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Leave a public method unwrapped: a long one made of steps that each take the guard (a
    bulk write's chunks, :meth:`shared.engines.sql.retention.RetentionSql.purge_finished`), so
    that an engine whose guard holds a lock (a connection that threads share) lets the other
    threads in between steps."""
    fn.__jobq_unguarded__ = True  # type: ignore[attr-defined]
    return fn


def guard_public_methods(
    cls: type, guarded: Callable[[Callable[..., Any]], Callable[..., Any]]
) -> type:
    """Replace every public function of ``cls`` (and its bases) by ``guarded(fn)``: the engine's
    wrapper that translates its driver's exceptions. Costs one call frame per store call."""
    for name in dir(cls):
        fn = inspect.getattr_static(cls, name)
        if (
            (name.startswith("_") and name not in GUARDED_PRIVATE)
            or not inspect.isfunction(fn)
            or getattr(fn, "__jobq_unguarded__", False)
        ):
            continue
        setattr(cls, name, guarded(fn))
    return cls
