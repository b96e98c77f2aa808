"""OpenTelemetry, only where the application imported it: the trace context and the hooks
(``tracing``), the worker's span of a run (``spans``) and the metric instruments (``meters``).
"""
