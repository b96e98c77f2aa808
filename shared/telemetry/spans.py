"""The worker's CONSUMER span of a job's run (see :mod:`shared.telemetry.tracing`), made by a
:class:`Consumer` bound once per process to the SDK tracer that records it.

Per job, jobq's own share of the span is kept to what the span needs: one ``start_span`` call
with every attribute known at the start (no per-attribute calls, links only for a retry), one
context attach and detach around the run (the handler's own spans and log lines belong to it; no
context manager), one attribute for the outcome, and the exception and ERROR status only for a
run that did not complete. Everything looked up in OpenTelemetry's modules is looked up once,
in the constructor, never per job. Never imports OpenTelemetry (it is in ``sys.modules`` once a
:class:`Consumer` is made)."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable

from shared.model.errortext import headline
from shared.telemetry.meters import QUEUE, SCOPE

_PLAIN = '{"traceparent":"'  # how the stored context of an enqueue without tracestate starts


class Consumer:
    """The CONSUMER spans of one process's runs on ``tracer`` (an SDK tracer; ``api``: the
    ``opentelemetry.trace`` module). The stored context last read is kept, so the jobs of a
    batch enqueued under one span parse it once."""

    def __init__(self, api: Any, tracer: Any) -> None:
        context = sys.modules["opentelemetry.context"]
        self.api = api
        self._start = tracer.start_span
        self._attach, self._detach = context.attach, context.detach
        self._current = api.set_span_in_context
        self._kind = api.SpanKind.CONSUMER
        # An empty Context (immutable: setting a value makes a new one), the parent of a root span:
        # a run's span is never a child of the worker's own context
        self.empty = context.Context()
        # (stored text, its parsed contexts: see _stored)
        self._last: tuple[str | None, Any] = (None, (self.empty, None, None))

    def run(self, job: Any, run: Callable[[], Any]) -> Any:
        """``run()`` in the job's span: started with every attribute at once, current while the
        handler runs, ended with the outcome, whose ``span`` is set to the span's context (for
        the job's log line, written after the span ended). ``run()`` returns a new outcome (a
        frozen dataclass with ``kind``, ``error``, ``exc`` and ``span``) that only this call holds."""
        span = self._begin(job)
        token = self._attach(self._current(span))
        try:
            outcome = run()
        except (
            BaseException
        ):  # run() classifies every handler failure: this is jobq's own, or an interrupt
            span.end()
            raise
        finally:
            self._detach(token)
        span.set_attribute("jobq.outcome", outcome.kind)
        if outcome.kind != "completed":
            self._failed(span, outcome)
        span.end()
        ctx = span.get_span_context()
        if ctx.is_valid:
            # Set in place, not by dataclasses.replace (a copy of every field, ~2 us per job):
            # the outcome is this run's own (see the docstring), shared with no one yet
            object.__setattr__(outcome, "span", ctx)
        return outcome

    def _begin(self, job: Any) -> Any:
        """The job's span, started (not yet current) with every attribute known at the start, a
        child of or linked to the job's stored context (see :meth:`_parent`)."""
        parent, links = self._parent(job)
        return self._start(
            f"process {job.type}",
            context=parent,
            kind=self._kind,
            links=links,
            attributes={
                "messaging.system": SCOPE,
                "messaging.operation": "process",
                "messaging.destination.name": job.queue or QUEUE,
                "messaging.message.id": job.id,
                "jobq.job.type": job.type,
                "jobq.attempt": job.attempts,
            },
            record_exception=False,
            set_status_on_exception=False,
        )

    def _failed(self, span: Any, outcome: Any) -> None:
        """A run that did not complete: its exception as a span event, status ERROR with the
        line that stands for its error (its exception's type and first line: shared.model.errortext)."""
        if outcome.exc is not None:
            span.record_exception(outcome.exc)
        line = headline(outcome.error)[:200]
        span.set_status(self.api.Status(self.api.StatusCode.ERROR, line or None))

    def _parent(self, job: Any) -> tuple[Any, Any]:
        """(parent context, links) of the job's span: attempt 1 a child of the stored context, a
        later attempt a root (a new trace) linked to the previous attempt's span (stored by its
        retry: :func:`shared.telemetry.tracing.retried`), or to the stored context when no
        attempt stored one; a job without a context a root."""
        text = job.trace
        if text is None:
            return self.empty, None
        if text != self._last[0]:
            self._last = (text, self._stored(text))
        parent, enqueued, previous = self._last[1]
        if job.attempts <= 1:
            return parent, None
        linked = previous if previous is not None else enqueued
        if linked is None:
            return self.empty, None
        return self.empty, (self.api.Link(linked, {"jobq.link": "retry_of"}),)

    def _stored(self, text: str) -> tuple[Any, Any, Any]:
        """The stored context as (an OpenTelemetry Context holding the enqueuer's span context as
        the remote parent, or the empty one; that SpanContext; the previous attempt's), each
        None where absent or unreadable. Parsed here, not by the propagator: jobq wrote it (the
        format was checked at enqueue), so its common shape is sliced, not decoded."""
        if len(text) == 73 and text.startswith(_PLAIN):  # {"traceparent":"<55 chars>"}
            carrier: Any = {"traceparent": text[16:71]}
        else:
            try:
                carrier = json.loads(text)
            except ValueError:
                return self.empty, None, None
        if not isinstance(carrier, dict):
            return self.empty, None, None
        state = carrier.get("tracestate")
        enqueued = self._context(carrier.get("traceparent"), state)
        previous = self._context(carrier.get("attempt"), None)
        if enqueued is None:
            return self.empty, None, previous
        parent = self.api.set_span_in_context(self.api.NonRecordingSpan(enqueued), self.empty)
        return parent, enqueued, previous

    def _context(self, traceparent: Any, state: Any) -> Any:
        """The remote SpanContext of W3C ``traceparent`` text (and ``tracestate``), or None."""
        if not isinstance(traceparent, str):
            return None
        api = self.api
        try:
            version, trace_id, span_id, flags = traceparent.split("-")
            ctx = api.SpanContext(
                int(trace_id, 16),
                int(span_id, 16),
                True,
                api.TraceFlags(int(flags, 16)),
                api.TraceState.from_header([state]) if isinstance(state, str) and state else None,
            )
        except (ValueError, TypeError, AttributeError):
            return None
        return ctx if ctx.is_valid and version != "ff" else None
