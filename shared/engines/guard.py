"""The class decorator both engines use to turn their driver's errors into jobq's own."""
from __future__ import annotations

import inspect
from typing import Any, Callable


def guard_public_methods(cls: type, guarded: Callable[[Callable[..., Any]], Callable[..., Any]]) -> type:
    """Replace every public function of ``cls`` (and its bases) by ``guarded(fn)``: the engine's
    wrapper that translates its driver's exceptions. Costs one call frame per store call."""
    for name in dir(cls):
        fn = inspect.getattr_static(cls, name)
        if name.startswith("_") or not inspect.isfunction(fn):
            continue
        setattr(cls, name, guarded(fn))
    return cls
