"""Trace receivers of the tests' own on loopback, standing for an OpenTelemetry collector
(OTLP over HTTP, protobuf, on /v1/traces) and a Datadog Agent's trace intake (msgpack on
/v0.4/traces or /v0.5/traces): each decodes what the real exporters send and keeps every span
as a plain `Span`, so a test reads the trace barca's processes produced, joined or not.
Anything else they are asked (ddtrace's /info, its remote configuration, its own telemetry)
gets a 404, as from an agent that has no such feature.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Span:
    name: str
    trace_id: int
    span_id: int
    parent_id: int  # 0 for a root
    resource: str
    attributes: dict[str, Any] = field(default_factory=dict)
    error: bool = False
    start_ns: int = 0
    end_ns: int = 0
    service: str = ""


class Intake:
    """A receiver on a free loopback port; `url` to point an exporter at, `spans` received."""

    def __init__(self, decode: Any, paths: tuple[str, ...], reply: Any) -> None:
        self.spans: list[Span] = []
        self.paths: list[str] = []
        intake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                intake.paths.append(path)
                if path not in paths:
                    self._answer(404, b"{}", "application/json")
                    return
                spans = decode(path, body)
                intake.spans.extend(spans)
                self._answer(200, *reply())

            do_PUT = do_POST  # ddtrace sends traces with PUT

            def do_GET(self) -> None:
                self._answer(404, b"{}", "application/json")

            def _answer(self, code: int, body: bytes, kind: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- OpenTelemetry: OTLP/HTTP protobuf ---------------------------------------------------------

def otlp_intake() -> Intake:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    return Intake(_decode_otlp, ("/v1/traces",),
                  lambda: (ExportTraceServiceResponse().SerializeToString(),
                           "application/x-protobuf"))


def _decode_otlp(path: str, body: bytes) -> list[Span]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    out = []
    for resource_spans in request.resource_spans:
        service = {a.key: _otlp_value(a.value) for a in resource_spans.resource.attributes
                   }.get("service.name", "")
        for scope in resource_spans.scope_spans:
            for s in scope.spans:
                attributes = {a.key: _otlp_value(a.value) for a in s.attributes}
                out.append(Span(s.name, int.from_bytes(s.trace_id, "big"),
                                int.from_bytes(s.span_id, "big"),
                                int.from_bytes(s.parent_span_id or b"\0", "big"),
                                attributes.get("barca.resource", ""), attributes,
                                s.status.code == 2, s.start_time_unix_nano,
                                s.end_time_unix_nano, service))
    return out


def _otlp_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_otlp_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


# -- Datadog: the Agent's trace intake ---------------------------------------------------------

def datadog_intake() -> Intake:
    return Intake(_decode_datadog, ("/v0.4/traces", "/v0.5/traces"),
                  lambda: (json.dumps({"rate_by_service": {}}).encode(), "application/json"))


def _decode_datadog(path: str, body: bytes) -> list[Span]:
    import msgpack

    payload = msgpack.unpackb(body, raw=False, strict_map_key=False)
    if path == "/v0.5/traces":  # [strings, traces], each span a list of string indices
        strings, traces = payload
        traces = [[{"service": strings[s[0]], "name": strings[s[1]],
                    "resource": strings[s[2]], "trace_id": s[3], "span_id": s[4],
                    "parent_id": s[5], "start": s[6], "duration": s[7], "error": s[8],
                    "meta": {strings[k]: strings[v] for k, v in s[9].items()},
                    "metrics": {strings[k]: v for k, v in s[10].items()}}
                   for s in trace] for trace in traces]
    else:
        traces = payload
    out = []
    for trace in traces:
        # 128-bit trace ids: the high half travels as the tag _dd.p.tid (hex) on one span
        # of each chunk
        high = next((int(s["meta"]["_dd.p.tid"], 16) for s in trace
                     if "_dd.p.tid" in (s.get("meta") or {})), 0)
        for s in trace:
            meta, metrics = s.get("meta") or {}, s.get("metrics") or {}
            out.append(Span(s["name"], s["trace_id"] + (high << 64), s["span_id"],
                            s.get("parent_id") or 0, s.get("resource", ""),
                            {**meta, **metrics}, bool(s.get("error")), s.get("start", 0),
                            s.get("start", 0) + s.get("duration", 0), s.get("service", "")))
    return out
