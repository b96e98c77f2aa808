"""Is a job type served? The producer's check of the types it enqueues.

Two ways to know the served types, chosen by the producer (``JobQueue.check_types``):

- **recorded** (``JobQueue.from_config``, a task's default queue): what the running supervisors
  recorded in the database when they imported their handler modules (:mod:`shared.ops.served`).
  The producer imports nothing and runs no handler module's import-time code: at a job type it
  has not checked yet it reads the record (one small read), and again once before it warns, so
  a supervisor started or reloaded since is seen. While no supervisor runs on the database
  nothing is known and nothing is said.
- **imported** (``check_types()`` called by the user, ``jobq enqueue``, and any producer whose
  config says ``strict_types = true``): the producer imports the config's ``handlers`` modules
  once, as a worker would (:func:`shared.execution.handlers.load_registry`), or uses the handlers it
  was given (``JobQueue(handlers=...)``). A module that fails to import here makes every type
  uncertain: warned, or refused when strict.

A type none serves is refused with ValueError when ``strict_types = true``, else warned about
once (:class:`UnservedTypeWarning`), so a typo in a type name is not found only when the first
worker fails the job. Each type is checked once per producer.
"""

from __future__ import annotations

import difflib
import warnings
from typing import Any

from shared.settings.config import Config
from shared.execution.handlers import HandlerImportError, load_registry
from shared.model.unserved import caller_level
from shared.producer.inline import registry_of
from shared.ops.served import Served, served_types


class UnservedTypeWarning(UserWarning):
    """A job type was enqueued that no configured handler module serves."""


class TypeCheck:
    """The served-type check of one producer. ``handlers``: what the producer itself runs
    (``JobQueue(handlers=...)``), else None: the config's ``handlers`` modules. ``store``: check
    against what the running supervisors recorded there instead of importing anything (unless
    the config says ``strict_types = true``); None: import."""

    def __init__(self, config: Config, handlers: Any = None, store: Any = None) -> None:
        self.config = config
        self.handlers = handlers
        self.store = store if handlers is None and not config.strict_types else None
        self.served: frozenset[str] | None = None
        self.checked: set[str] = set()
        self.broken: str | None = None  # why the handler modules could not be imported here
        self.queues: dict[str, str | None] = {}  # job type -> its handler's @handler(queue=)
        self.record: Served | None = None  # the supervisors' record, when checking against it
        self.looked: set[str] = set()  # the types the record was read for

    def check(self, jtype: str) -> None:
        """Return if ``jtype`` is served; else raise ValueError (strict) or warn once."""
        if jtype in self.checked:
            return
        self._know(jtype)
        why = self._why_not(jtype)
        if why is not None and self.config.strict_types:
            raise ValueError(f"{why}; strict_types = true refuses it")
        self.checked.add(jtype)
        if why is not None:
            warnings.warn(
                f"{why}; a worker would fail it", UnservedTypeWarning, stacklevel=caller_level()
            )

    def _know(self, jtype: str) -> None:
        """Load what is served, if it is not known yet; with a record that does not name
        ``jtype``, read it again, once per type (a supervisor may have started or reloaded)."""
        if self.store is None:
            if self.served is None and self.broken is None:
                self._load()
        elif jtype not in self.looked and (self.record is None or jtype not in self.record.queues):
            self.looked.add(jtype)
            self.record = served_types(self.store)
            self.served = None if self.record is None else frozenset(self.record.queues)
            self.queues = {} if self.record is None else self.record.queues

    def _where(self) -> str:
        if self.handlers is not None:
            return "the handlers this queue was given"
        if self.record is not None:
            names = ", ".join(self.record.modules) or "none"
            return f"the handler modules the running supervisors loaded ({names})"
        names = ", ".join(self.config.handlers) or "none"
        return f"the handler modules of the handlers key in {self.config.path or 'the config'} ({names})"

    def _why_not(self, jtype: str) -> str | None:
        if self.broken is not None:
            return f"cannot tell whether job type {jtype!r} is served: {self.broken}"
        if self.served is None or jtype in self.served:  # (None: no supervisor recorded any)
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
        self.queues = {
            t: spec.queue for t in registry.types() if (spec := registry.get(t)) and spec.queue
        }

    def queue_of(self, jtype: str) -> str | None:
        """The queue ``@handler(queue=)`` gives ``jtype`` in the loaded handlers or in the
        supervisors' record, or None."""
        self._know(jtype)
        return self.queues.get(jtype)
