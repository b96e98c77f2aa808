"""Is a job type served? The producer's check of ``strict_types``.

A producer that read the config file (``JobQueue.from_config``, ``jobq enqueue``) knows the
``handlers`` modules the workers import. At the first job type it has not checked yet it imports
those modules once, as a worker would (:func:`shared.handlers.load_registry`), and remembers the
types they serve. A type none serves is refused with ValueError when ``strict_types = true``,
else warned about once (:class:`UnservedTypeWarning`), so a typo in a type name is not found
only when the first worker fails the job. Each type is checked once per producer; the modules
are imported at most once (a module that fails to import here makes every type uncertain:
warned, or refused when strict).
"""
from __future__ import annotations

import difflib
import warnings
from typing import Any

from .config import Config
from .handlers import HandlerImportError, load_registry
from .inline import registry_of

STACKLEVEL = 5  # warn() here <- check <- _type_priority <- _build <- enqueue <- the caller


class UnservedTypeWarning(UserWarning):
    """A job type was enqueued that no configured handler module serves."""


class TypeCheck:
    """The served-type check of one producer. ``handlers``: what the producer itself runs
    (``JobQueue(handlers=...)``), else None: the config's ``handlers`` modules."""

    def __init__(self, config: Config, handlers: Any = None) -> None:
        self.config = config
        self.handlers = handlers
        self.served: frozenset[str] | None = None
        self.checked: set[str] = set()
        self.broken: str | None = None  # why the handler modules could not be imported here
        self.queues: dict[str, str] = {}  # job type -> its handler's queue (@handler(queue=))

    def check(self, jtype: str) -> None:
        """Return if ``jtype`` is served; else raise ValueError (strict) or warn once."""
        if jtype in self.checked:
            return
        if self.served is None and self.broken is None:
            self._load()
        why = self._why_not(jtype)
        if why is not None and self.config.strict_types:
            raise ValueError(f"{why}; strict_types = true refuses it")
        self.checked.add(jtype)
        if why is not None:
            warnings.warn(f"{why}; a worker would fail it", UnservedTypeWarning, stacklevel=STACKLEVEL)

    def _where(self) -> str:
        if self.handlers is not None:
            return "the handlers this queue was given"
        names = ", ".join(self.config.handlers) or "none"
        return f"the handler modules of the handlers key in {self.config.path or 'the config'} ({names})"

    def _why_not(self, jtype: str) -> str | None:
        if self.broken is not None:
            return f"cannot tell whether job type {jtype!r} is served: {self.broken}"
        assert self.served is not None
        if jtype in self.served:
            return None
        near = difflib.get_close_matches(jtype, sorted(self.served), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        return f"job type {jtype!r} is served by none of {self._where()}{hint}"

    def _load(self) -> None:
        try:
            if self.handlers is None:
                registry = load_registry(self.config.handlers, self.config.path)
            else:
                registry = registry_of(self.handlers)
        except HandlerImportError as exc:
            self.broken = exc.summary
            return
        self.served = frozenset(registry.types())
        self.queues = {t: spec.queue for t in registry.types() if (spec := registry.get(t)) and spec.queue}

    def queue_of(self, jtype: str) -> str | None:
        """The queue ``@handler(queue=)`` gives ``jtype`` in the loaded handlers, or None."""
        if self.served is None and self.broken is None:
            self._load()
        return self.queues.get(jtype)
