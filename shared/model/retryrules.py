"""Which failures of a job are retried, and how long a retry waits, as a task declares them in
code (``@task(retry_for=..., no_retry_for=..., backoff=..., jitter=..., max_delay=...)`` or
``.using(...)``): one :class:`RetryRule`.

Exceptions are matched by name (``"module.QualName"`` of each class in the raised exception's
method resolution order), so a worker judges an exception without importing anything, and a
rule stored in a job's payload (``.using()``, under :data:`PAYLOAD_KEY`) reads as one on the
task does. The decision, in this order:

1. ``no_retry_for`` names the exception's class or one of its bases: the job fails for good,
   even when ``retry_for`` names it too (the narrower "never" wins, as Celery's
   ``dont_autoretry_for`` does over ``autoretry_for``);
2. ``retry_for`` is given and names neither the class nor a base: the job fails for good;
3. anything else is retried while attempts last.

``PermanentError``, ``RetryAfter`` and a cancel keep their meaning whatever the rule says; a
timeout or a lost worker is retried by attempts as before (no exception of the task's judged).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable

PAYLOAD_KEY = "retry"  # a task job's own rule (from .using()), beside "args" and "kwargs"
MAX_SECONDS = 7 * 86400.0  # the longest back-off a rule may ask for, as [retry] backoff_max


def class_name(cls: type) -> str:
    """How a rule names an exception class: ``"module.QualName"``."""
    return f"{cls.__module__}.{cls.__qualname__}"


@dataclass(frozen=True)
class RetryRule:
    """``retry_for``: the exception classes (by :func:`class_name`) worth a retry, None: all;
    ``no_retry_for``: those never retried; ``backoff``: the base of the exponential back-off
    (seconds: ``backoff * 2**n`` after the n-th failure), ``max_delay``: its cap (seconds),
    ``jitter``: the fraction (0 to 1) a delay may be drawn down by. None: not said here."""

    retry_for: tuple[str, ...] | None = None
    no_retry_for: tuple[str, ...] = ()
    backoff: float | None = None
    jitter: float | None = None
    max_delay: float | None = None

    def refuses(self, exc: BaseException) -> str | None:
        """Why ``exc`` fails the job for good under this rule (a sentence), or None."""
        if self.retry_for is None and not self.no_retry_for:
            return None
        names = [class_name(c) for c in type(exc).__mro__]
        hit = next((n for n in names if n in self.no_retry_for), None)
        if hit is not None:
            return f"{names[0]} is covered by no_retry_for ({hit}): the job is not retried"
        if self.retry_for is not None and not any(n in self.retry_for for n in names):
            listed = ", ".join(self.retry_for) or "nothing"
            return f"{names[0]} is not covered by retry_for ({listed}): the job is not retried"
        return None

    def over(self, base: RetryRule | None) -> RetryRule:
        """This rule, with ``base``'s value wherever this one says nothing."""
        if base is None:
            return self
        mine = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        said = {k: v for k, v in mine.items() if v is not None and (v != () or k == "retry_for")}
        return dataclasses.replace(base, **said)

    def to_json(self) -> dict[str, Any]:
        """The rule as a payload stores it: only what it says."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in out.items() if v not in (None, ())
        }


def make_rule(
    owner: str,
    retry_for: Any = None,
    no_retry_for: Any = None,
    backoff: Any = None,
    jitter: Any = None,
    max_delay: Any = None,
) -> RetryRule | None:
    """The rule of these options (None when none is given); TypeError/ValueError naming
    ``owner`` (``"task 'x'"``) and the option for one that is not valid."""
    if all(v is None for v in (retry_for, no_retry_for, backoff, jitter, max_delay)):
        return None
    return RetryRule(
        None if retry_for is None else _classes(owner, "retry_for", retry_for),
        () if no_retry_for is None else _classes(owner, "no_retry_for", no_retry_for),
        _seconds(owner, "backoff", backoff),
        _jitter(owner, jitter),
        _seconds(owner, "max_delay", max_delay),
    )


def _classes(owner: str, option: str, value: Any) -> tuple[str, ...]:
    items: Iterable[Any] = (value,) if isinstance(value, type) else value
    try:
        items = tuple(items)
    except TypeError:
        items = (value,)
    for cls in items:
        if not (isinstance(cls, type) and issubclass(cls, BaseException)):
            raise TypeError(
                f"{owner}: {option} takes exception classes (a class or a tuple of them), "
                f"got {cls!r}"
            )
    return tuple(class_name(cls) for cls in items)


def _seconds(owner: str, option: str, value: Any) -> float | None:
    if value is None:
        return None
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not 0 <= value <= MAX_SECONDS
    ):
        raise ValueError(
            f"{owner}: {option} must be a number of seconds from 0 to {MAX_SECONDS:g}, "
            f"got {value!r}"
        )
    return float(value)


def _jitter(owner: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):  # True: the usual 25%, False: none
        return 0.25 if value else 0.0
    if not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(
            f"{owner}: jitter must be a fraction from 0 to 1 (or True/False), got {value!r}"
        )
    return float(value)


def rule_of_payload(payload: Any) -> RetryRule | None:
    """The rule a job's payload carries (:data:`PAYLOAD_KEY`), or None. What does not read as
    one (a payload written by hand) is ignored: the job's other rules apply."""
    data = payload.get(PAYLOAD_KEY) if isinstance(payload, dict) else None
    if not isinstance(data, dict):
        return None
    try:
        return RetryRule(
            _names(data.get("retry_for")),
            _names(data.get("no_retry_for")) or (),
            _seconds("job", "backoff", data.get("backoff")),
            _jitter("job", data.get("jitter")),
            _seconds("job", "max_delay", data.get("max_delay")),
        )
    except (TypeError, ValueError):
        return None


def _names(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise TypeError("a list of class names")
    return tuple(value)
