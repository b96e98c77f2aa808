"""The jobs a producer writes, made from a job type, a payload and the job's
:class:`shared.producer.options.Options`, under a config and the producer's
:class:`shared.producer.typecheck.TypeCheck` (None: no served-type check).

One path for every enqueue (``enqueue``, each ``enqueue_many`` item, tasks), in two steps:
:func:`template` checks everything but the payload (the parents named by ``after``, the job type,
a given limit key, the queue, then the options) into a :class:`Template`, and
:meth:`Template.job` checks the payload (the limit key read from it, its JSON and size) and makes
the :class:`shared.model.job.NewJob`. The first problem raises TypeError or ValueError naming it,
and nothing is written. What is checked once is not checked again: the ``(type, payload)`` items
of one ``enqueue_many`` call share one template per type, and a plain ``enqueue`` (no option
given) of a type that passed before under the same config passes what that call found
(:data:`Known`): its type is not checked, nor its queue warned about, again, and its job is made
from it directly (:func:`plain_job`: no option to check, no template to build).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from shared.model import bounds
from shared.model.job import NewJob, encode_json
from shared.model.keys import limit_key_of
from shared.model.queuenames import DEFAULT_QUEUE, check_queue
from shared.model.uniqueness import Unique, derived_key, unique_scope
from shared.model.unserved import warn_unserved
from shared.producer.options import PLAIN, Options
from shared.producer.typecheck import TypeCheck
from shared.settings.config import Config

Known = tuple[int, str, str | None]  # a checked type's default priority, queue, limit key path


@dataclass(frozen=True, slots=True)
class Template:
    """A job's checked settings: everything its row holds but the id, the payload and a limit
    key read from the payload (at ``key_path``, when no ``limit_key`` was given)."""

    priority: int
    run_at: float
    max_attempts: int | None
    key: str | None
    queue: str
    limit_key: str | None
    key_path: str | None
    after: tuple[str, ...]
    after_failure: str | None
    unique: Unique | None = None

    def job(self, config: Config, job_id: str, jtype: str, payload: Any) -> NewJob:
        """The job ``job_id`` of ``jtype`` with ``payload``, checked (see the module)."""
        limit_key = self.limit_key
        if limit_key is None and self.key_path is not None:
            limit_key = limit_key_of(jtype, payload, None, self.key_path)
        text = payload_text(config, jtype, payload)
        key = self.key
        if key is None and self.unique is not None:  # unique= alone: keyed by type and payload
            key = derived_key(jtype, text)
        return NewJob(
            job_id,
            jtype,
            text,
            self.priority,
            self.run_at,
            self.max_attempts,
            key,
            queue=self.queue,
            limit_key=limit_key,
            after=self.after,
            after_failure=self.after_failure,
            unique=self.unique,
        )


def template(
    config: Config,
    types: TypeCheck | None,
    jtype: Any,
    options: Options,
    now: float,
    *,
    ids: Sequence[str] = (),
    index: int | None = None,
    known: Known | None = None,
) -> Template:
    """Check everything of a job but its payload (see the module). ``ids`` and ``index``: the
    ids of an ``enqueue_many`` call and this item's place in it (the earlier items its ``after``
    may name). ``known``: what a plain job of ``jtype`` found before (plain ``options`` only)."""
    after = options.parents(ids, index)
    if known is None:
        default_priority = type_priority(config, types, jtype)
        given = options.limit_key
        limit_key = None if given is None else limit_key_of(jtype, None, given, None)
        queue = warn_unserved(config, type_queue(config, types, jtype, options.queue))
        key_path = config.for_type(jtype).key
    else:
        (default_priority, queue, key_path), limit_key = known, None
    priority, run_at, max_attempts, key, after_failure = options.checked(
        jtype, default_priority, now
    )
    unique = unique_scope(options.unique, f"job {jtype!r}")
    return Template(
        priority,
        run_at,
        max_attempts,
        key,
        queue,
        limit_key,
        key_path,
        after,
        after_failure,
        unique,
    )


def plain_job(
    config: Config, known: Known, job_id: str, jtype: str, payload: Any, now: float
) -> NewJob:
    """The job ``template(config, types, jtype, PLAIN, now, known=known).job(config, job_id,
    jtype, payload)`` makes (a plain job of a type that passed before), without the option
    checks that cannot fail for it nor the template: the same checks of ``now`` (as ``run_at``),
    the limit key read from the payload and the payload, in that order, with the same errors."""
    priority, queue, key_path = known
    run_at = PLAIN.when(now)
    limit_key = None if key_path is None else limit_key_of(jtype, payload, None, key_path)
    text = payload_text(config, jtype, payload)
    return NewJob(
        job_id, jtype, text, priority, run_at, None, None, queue=queue, limit_key=limit_key
    )


def known_of(config: Config, types: TypeCheck | None, jtype: str) -> Known:
    """A checked type's default priority, queue and limit key path (under ``config``)."""
    settings = config.for_type(jtype)
    return settings.priority or 0, type_queue(config, types, jtype), settings.key


def type_priority(config: Config, types: TypeCheck | None, jtype: Any) -> int:
    """Check a job type (its name, and whether it is served); its default priority."""
    why = bounds.type_name_error(jtype)
    if why is not None:
        raise ValueError(why)
    if types is not None:
        types.check(jtype)
    return config.for_type(jtype).priority or 0


def type_queue(config: Config, types: TypeCheck | None, jtype: str, queue: Any = None) -> str:
    """The queue of a job: ``queue`` if given (checked), else the type's ``[types]`` queue,
    else its handler's (``@handler(queue=)``, where this producer loaded the handlers),
    else ``"default"``."""
    if queue is not None:
        return check_queue(queue)
    named = config.for_type(jtype).queue
    if named is None and types is not None:
        named = types.queue_of(jtype)
    return named or DEFAULT_QUEUE


def payload_text(config: Config, jtype: str, payload: Any) -> str:
    """The payload as JSON text, within ``max_payload_bytes``."""
    text = encode_json(payload, f"payload of job type {jtype!r}")
    # a character is at most 4 bytes of UTF-8: short payloads skip the encoding
    size = len(text) if len(text) * 4 <= config.max_payload_bytes else len(text.encode("utf-8"))
    if size > config.max_payload_bytes:
        raise ValueError(
            f"payload of job type {jtype!r} is {size} bytes, above the limit of "
            f"{config.max_payload_bytes} (max_payload_bytes)"
        )
    return text
