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
        self._last: tuple[str | None, Any] = (None, None)  # (stored text, its parent context)

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
        later attempt a root linked to it (a new trace), a job without one a root."""
        text = job.trace
        if text is None:
            return self.empty, None
        if text != self._last[0]:
            self._last = (text, self._stored(text))
        stored = self._last[1]
        if stored is None:
            return self.empty, None
        if job.attempts <= 1:
            return stored[0], None
        return self.empty, (self.api.Link(stored[1], {"jobq.link": "retry_of"}),)

    def _stored(self, text: str) -> tuple[Any, Any] | None:
        """The stored context as (an OpenTelemetry Context holding it as the remote parent, its
        SpanContext), or None (empty, or unreadable). Parsed here, not by the propagator: the
        format was checked at enqueue."""
        api = self.api
        try:
            carrier = json.loads(text)
            version, trace_id, span_id, flags = carrier["traceparent"].split("-")
            state = carrier.get("tracestate")
            ctx = api.SpanContext(
                int(trace_id, 16),
                int(span_id, 16),
                is_remote=True,
                trace_flags=api.TraceFlags(int(flags, 16)),
                trace_state=api.TraceState.from_header([state])
                if isinstance(state, str) and state
                else None,
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        if not ctx.is_valid or version == "ff":
            return None
        return api.set_span_in_context(api.NonRecordingSpan(ctx), self.empty), ctx
