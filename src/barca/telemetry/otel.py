"""`BARCA_TELEMETRY=otel`: spans through the OpenTelemetry SDK.

Where they go is the SDK's standard configuration: the OTLP exporter (`OTEL_EXPORTER_OTLP_*`:
endpoint, headers, timeout, `..._PROTOCOL` `http/protobuf` by default or `grpc`), the
resource from `OTEL_SERVICE_NAME` (default `barca`) and `OTEL_RESOURCE_ATTRIBUTES`,
`OTEL_TRACES_EXPORTER=none` to make spans without sending them. A process that already set
an SDK tracer provider (a program calling `barca.get`, a test with an in-memory exporter)
has its spans go there instead. The context crosses to workers as W3C `traceparent`
headers, whatever `OTEL_PROPAGATORS` says: both ends are barca.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from barca.telemetry import Error, Unavailable

try:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # the optional extra barca[otel] is not installed
    raise Unavailable("barca[otel]") from exc

_NS = 1_000_000_000


class OtelBackend:
    name = "otel"

    def __init__(self, provider: Any) -> None:
        from barca import __version__

        self.provider = provider
        self.tracer = provider.get_tracer("barca", __version__)
        self.propagator = TraceContextTextMapPropagator()

    def start(self, name: str, parent: Any, resource: str, start: float | None = None) -> Any:
        context = trace.set_span_in_context(parent) if isinstance(parent, trace.Span) \
            else parent
        span = self.tracer.start_span(
            name, context=context, kind=trace.SpanKind.INTERNAL,
            start_time=None if start is None else int(start * _NS))
        span.set_attribute("barca.resource", resource)
        return span

    def end(self, span: Any, attributes: Mapping[str, Any], error: Error | None = None,
            end: float | None = None) -> None:
        span.set_attributes({k: v for k, v in attributes.items() if v is not None})
        if error is not None:
            kind, message, stack = error
            span.set_attributes({"error.type": kind, "error.message": message,
                                 **({"error.stack": stack} if stack else {})})
            span.set_status(trace.Status(trace.StatusCode.ERROR, f"{kind}: {message}"))
        span.end(end_time=None if end is None else int(end * _NS))

    def inject(self, span: Any) -> tuple[tuple[str, str], ...]:
        headers: dict[str, str] = {}
        self.propagator.inject(headers, context=trace.set_span_in_context(span))
        return tuple(sorted(headers.items()))

    def extract(self, headers: tuple[tuple[str, str], ...]) -> Any:
        return self.propagator.extract(dict(headers))

    def activate(self, span: Any) -> Any:
        return trace.use_span(span, end_on_exit=False)

    def flush(self, timeout: float) -> bool:
        flush = getattr(self.provider, "force_flush", None)
        done = True if flush is None else bool(flush(int(timeout * 1000)))
        return done and not getattr(self.provider, "barca_undelivered", False)


def backend() -> OtelBackend:
    """The backend on this process's SDK provider: the one already set, else one of ours."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return OtelBackend(current)
    provider = _provider()
    trace.set_tracer_provider(provider)  # a step's own spans go to the same place
    return OtelBackend(provider)


def _provider() -> TracerProvider:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "barca"}))
    provider = TracerProvider(resource=resource)
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    if exporter != "none":
        provider.add_span_processor(BatchSpanProcessor(_Delivery(provider, _otlp_exporter())))
    return provider


class _Delivery:
    """The exporter, noting on the provider when a batch was refused or could not be sent
    (the SDK only logs it), so that the run can say so."""

    def __init__(self, provider: Any, exporter: Any) -> None:
        self.provider, self.exporter = provider, exporter

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self.exporter.export(spans)
        if result != SpanExportResult.SUCCESS:
            self.provider.barca_undelivered = True
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.force_flush(timeout_millis)


def _otlp_exporter() -> Any:
    """The OTLP exporter of the protocol the standard variables name; each reads its own
    endpoint, headers, timeout and compression from them."""
    protocol = (os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or
                os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError as exc:
        raise Unavailable("opentelemetry-exporter-otlp-proto-grpc" if protocol == "grpc"
                          else "barca[otel]") from exc
    return OTLPSpanExporter()
