"""A task's options in code beyond where its jobs go: what it retries and how long a retry
waits (``retry_for``, ``no_retry_for``, ``backoff``, ``jitter``, ``max_delay``), its limit key
(``limit_key``) and its periodic schedule (``schedule``, ``tz``, ``schedule_args``).

Two sides. :func:`spec_fields` makes what rides on the task's
:class:`shared.execution.handlers.HandlerSpec`, so a worker (the retry rule, judged by
shared.execution.runner and shared.execution.policy) and a supervisor (the schedule, run by
supervisor.scheduler) learn them by importing the task's module, with nothing of the producer's.
:func:`prepare` applies a call's options to each enqueue: the rule given to ``.using()`` rides in
the job's payload (``"retry"``, beside ``"args"`` and ``"kwargs"``), and the limit key is found.

Precedence, where more than one says something:

- retry options: ``.using()`` (the job's own) > ``[types."<task>"]`` (``backoff_base``,
  ``backoff_max``, ``jitter``) > ``@task(...)`` > ``[retry]``; ``retry_for``/``no_retry_for``
  are code only (``.using()``'s replace ``@task``'s);
- limit key: ``.using(limit_key=)`` > ``[types."<task>"] key`` > ``@task(limit_key=)``;
- schedule: a ``[[schedule]]`` entry of the task's name replaces the task's own;
- uniqueness scope: ``.using(unique=)`` > ``@task(unique=)`` (shared.model.uniqueness).
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Mapping

from shared.model.keys import key_text, parameter_path, task_key_error
from shared.model.uniqueness import Unique, derived_key, unique_scope
from shared.model.retryrules import PAYLOAD_KEY, RetryRule, make_rule
from shared.settings import cron
from shared.settings.sections import ScheduleConfig

RETRY = ("retry_for", "no_retry_for", "backoff", "jitter", "max_delay")
USING = (*RETRY, "limit_key")  # the options of .using() this module applies


def spec_fields(
    name: str,
    binder: Any,
    retry: dict[str, Any],
    schedule: str | None = None,
    tz: str | None = None,
    schedule_args: Any = None,
) -> dict[str, Any]:
    """The task's :class:`HandlerSpec` fields: its retry rule, schedule and parameter names;
    TypeError/ValueError naming the task and the option for one that is not valid."""
    return {
        "retry": make_rule(f"task {name!r}", **retry),
        "schedule": schedule_of(name, binder, schedule, tz, schedule_args),
        "params": tuple(binder.signature.parameters),
    }


def check_keys(name: str, limit_key: Any, unique: Any) -> Unique | None:
    """Check a task's ``limit_key`` (:func:`check_limit_key`) and ``unique`` (ValueError
    naming the task); the uniqueness scope (None: not given)."""
    check_limit_key(name, limit_key)
    return unique_scope(unique, f"task {name!r}")


def check_limit_key(name: str, value: Any) -> None:
    """TypeError naming the task unless ``value`` is None, a string, a number or a callable."""
    if value is None or callable(value) or isinstance(value, str):
        return
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return
    raise TypeError(
        f"task {name!r}: limit_key must be a string, a number or a function of the task's "
        f"arguments, got {value!r:.80}"
    )


def schedule_of(
    name: str, binder: Any, expr: str | None, tz: str | None, args: Any
) -> ScheduleConfig | None:
    """The task's own ``[[schedule]]``-like entry (named after the task), or None without
    ``schedule=``: its arguments (``schedule_args``: a tuple of positional ones or a mapping
    of keyword ones) bound and encoded now, so a task that cannot be called so is refused."""
    if expr is None:
        if tz is not None or args is not None:
            raise ValueError(f"task {name!r}: tz= and schedule_args= need schedule=")
        return None
    why = cron.cron_error(expr)
    if why is not None:
        raise ValueError(f"task {name!r}: schedule={expr!r}: {why}; {cron.CRON_EXPECTED}")
    if tz is not None and not cron.is_zone(tz):
        raise ValueError(f"task {name!r}: tz={tz!r}: expected {cron.ZONE_EXPECTED}")
    pos, kw = ((), dict(args)) if isinstance(args, Mapping) else (tuple(args or ()), {})
    try:
        payload = binder.payload(pos, kw)
    except (TypeError, ValueError) as exc:
        raise type(exc)(
            f"schedule={expr!r} runs the task with schedule_args={args!r}, which does not "
            f"fit: {exc}"
        ) from None
    return ScheduleConfig(name=name, type=name, cron=expr, timezone=tz or "UTC", payload=payload)


def using_rule(task: Any, given: dict[str, Any]) -> RetryRule | None:
    """The rule of the retry options given to ``.using()`` (popped from ``given``), over the
    one an earlier ``.using()`` gave; None when none was ever given."""
    options = {k: given.pop(k) for k in RETRY if k in given}
    rule = make_rule(f"task {task.name!r}", **options)
    earlier = task.options.get(PAYLOAD_KEY)
    return earlier if rule is None else rule.over(earlier)


def prepare(
    task: Any,
    config: Any,
    opts: dict[str, Any],
    call: tuple[tuple[Any, ...], dict[str, Any]],
    payload: dict[str, Any],
) -> dict[str, Any]:
    """The payload of one enqueue of ``task`` (its call's arguments ``call`` encoded as
    ``payload``) with the job's own retry rule, ``opts`` (the enqueue's options, from
    ``.using()``) given the limit key found (see the module's precedence) under ``config``
    (the queue's; None: no ``[types]`` key is looked for)."""
    if opts.get("unique") is not None and opts.get("key") is None:
        opts["key"] = unique_key(task, payload)
    rule = opts.pop(PAYLOAD_KEY, None)
    if rule is not None:
        payload = {**payload, PAYLOAD_KEY: rule.to_json()}
    key = opts.pop("limit_key", None)
    path = config.for_type(task.name).key if key is None and config is not None else None
    if path is not None:
        named = parameter_path(path)
        if named is not None:  # else a path into the payload, which the queue reads
            opts["limit_key"] = by_parameter(task, path, named, payload)
        return payload
    key = getattr(task, "limit_key", None) if key is None else key
    if callable(key):
        key = called(task, key, call)
    if key is not None:
        opts["limit_key"] = key_text(task.name, "limit_key", key)
    return payload


def unique_key(task: Any, payload: dict[str, Any]) -> str:
    """The key of a task's enqueue given ``unique=`` but no ``key=``: its name and its
    arguments by parameter name, defaults applied (as encoded for ``payload``), so a call
    passing them positionally and one passing them by keyword are the same job."""
    bound = task.binder.signature.bind(*payload["args"], **payload["kwargs"])
    bound.apply_defaults()
    return derived_key(task.name, json.dumps(bound.arguments))


def called(task: Any, fn: Any, call: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
    """``fn`` called with the task's arguments by parameter name, however the caller passed
    them, defaults applied (``lambda customer_id, **_: customer_id``); None: no key."""
    bound = task.binder.signature.bind(*call[0], **call[1])
    bound.apply_defaults()
    named: dict[str, Any] = {}
    for pname, value in bound.arguments.items():
        if task.binder.signature.parameters[pname].kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        else:
            named[pname] = value
    try:
        return fn(**named)
    except TypeError as exc:
        raise TypeError(
            f"task {task.name!r}: limit_key function {getattr(fn, '__qualname__', fn)!r} could "
            f"not be called with the task's arguments by name ({', '.join(named)}): {exc}"
        ) from None


def by_parameter(task: Any, path: str, named: list[str], payload: dict[str, Any]) -> str:
    """The limit key at ``[types."<task>"] key = path``: the value of the parameter it names
    (``named[0]``, as encoded for the payload, however the caller passed it), walked into by
    the rest of ``named``; ValueError naming the task and the path where there is none."""
    params = tuple(task.binder.signature.parameters)
    if named[0] not in params:
        raise ValueError(f"job {task.name!r}: {task_key_error(task.name, path, params)}")
    bound = task.binder.signature.bind(*payload["args"], **payload["kwargs"])
    bound.apply_defaults()
    value = bound.arguments.get(named[0], inspect.Parameter.empty)
    for part in named[1:]:
        if not isinstance(value, dict) or part not in value:
            raise ValueError(
                f'job {task.name!r}: [types."{task.name}"] key = {path!r}, but argument '
                f"{named[0]!r} has no {'.'.join(named[1:])}"
            )
        value = value[part]
    return key_text(task.name, f"argument {'.'.join(named)}", value)
