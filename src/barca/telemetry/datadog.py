"""`BARCA_TELEMETRY=datadog`: spans through `ddtrace`, in the coordinator and in each worker.

Where they go is ddtrace's own configuration: `DD_TRACE_AGENT_URL` (else `DD_AGENT_HOST` and
`DD_TRACE_AGENT_PORT`), `DD_ENV`, `DD_VERSION`, `DD_TAGS`; the service is `DD_SERVICE`, else
`barca`. Spans are of type `worker`; the run's root is kept (manual keep) so that a run is never
sampled away half. The context crosses to workers as ddtrace's own HTTP headers.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from barca.telemetry import Error, Unavailable

try:
    from ddtrace.constants import MANUAL_KEEP_KEY
    from ddtrace.propagation.http import HTTPPropagator
    from ddtrace.trace import Span, tracer
except ImportError as exc:  # the optional extra barca[datadog] is not installed
    raise Unavailable("barca[datadog]") from exc


class DatadogBackend:
    name = "datadog"

    def __init__(self) -> None:
        self.service = os.environ.get("DD_SERVICE") or "barca"

    def start(self, name: str, parent: Any, resource: str, start: float | None = None) -> Any:
        span = tracer.start_span(name, child_of=parent, service=self.service,
                                 resource=resource, span_type="worker")
        if parent is None:
            span.set_tag(MANUAL_KEEP_KEY)
        if start is not None:
            span.start = start
        span.set_tag("component", "barca")
        return span

    def end(self, span: Any, attributes: Mapping[str, Any], error: Error | None = None,
            end: float | None = None) -> None:
        for key, value in attributes.items():
            if isinstance(value, (bool, str)):  # a tag; numbers are metrics
                span.set_tag(key, str(value).lower() if isinstance(value, bool) else value)
            elif value is not None:
                span.set_metric(key, value)
        if error is not None:
            kind, message, stack = error
            span.error = 1
            span.set_tags({"error.type": kind, "error.message": message})
            if stack:
                span.set_tag("error.stack", stack)
        span.finish(finish_time=end)

    def inject(self, span: Any) -> tuple[tuple[str, str], ...]:
        headers: dict[str, str] = {}
        HTTPPropagator.inject(span.context, headers)
        return tuple(sorted(headers.items()))

    def extract(self, headers: tuple[tuple[str, str], ...]) -> Any:
        return HTTPPropagator.extract(dict(headers))

    def activate(self, span: Any) -> Any:
        return _Active(span)

    def flush(self, timeout: float) -> bool:
        """ddtrace's flush, which keeps retrying an agent it cannot reach (and says so on
        stderr): given `timeout` seconds, in a thread of its own."""
        import threading

        sending = threading.Thread(target=tracer.flush, daemon=True, name="barca-ddtrace")
        sending.start()
        sending.join(timeout)
        return not sending.is_alive()


class _Active:
    """ddtrace's current span while a step runs, then the one before."""

    def __init__(self, span: Span) -> None:
        self.span = span

    def __enter__(self) -> None:
        self.before = tracer.context_provider.active()
        tracer.context_provider.activate(self.span)

    def __exit__(self, *exc: Any) -> None:
        tracer.context_provider.activate(self.before)


def backend() -> DatadogBackend:
    return DatadogBackend()
