"""Traces of runs, sent where `BARCA_TELEMETRY` says (a comma list): `datadog` (through
`ddtrace`) or `otel` (through the OpenTelemetry SDK and its OTLP exporter).

Off by default, and then nothing here imports a tracing library: the engine asks
`run_trace` for a run's trace and gets `NO_TRACE`, whose methods do nothing, and a step spec
carries no trace context, so a worker never loads one either. What a span says is decided in
`run_trace` (the coordinator's `barca.run`, `barca.step` and `barca.partition` spans) and
`execute` (the worker's `barca.execute` span); `otel` and `datadog` only turn those calls into
their library's spans. A tracing problem never fails a run: it is a warning naming the fix.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Protocol

INTEGRATIONS = {"datadog": "barca.telemetry.datadog", "otel": "barca.telemetry.otel"}
VARIABLE = "BARCA_TELEMETRY"

# what a span's end records when it failed: (error type, message, traceback text or "")
Error = tuple[str, str, str]
# a trace context as it crosses to a worker: (integration, its headers) per integration
Carrier = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]


class Backend(Protocol):
    """One tracing library, as run_trace and execute use it. Times are epoch seconds; a span
    handle is whatever the library's span is."""

    name: str

    def start(self, name: str, parent: Any, resource: str, start: float | None = None) -> Any:
        """A new span under `parent` (a span, an extracted context, or None for a root)."""

    def end(self, span: Any, attributes: Mapping[str, Any], error: Error | None = None,
            end: float | None = None) -> None:
        """Set the span's attributes (None values left out) and end it."""

    def inject(self, span: Any) -> tuple[tuple[str, str], ...]:
        """The headers that make a span the parent of one in another process."""

    def extract(self, headers: tuple[tuple[str, str], ...]) -> Any:
        """The parent `inject`'s headers describe."""

    def activate(self, span: Any) -> Any:
        """A context manager making `span` the current one (so that a step's own spans join
        it); None when the library cannot."""

    def flush(self, timeout: float) -> bool:
        """Send what is buffered, waiting at most `timeout` seconds; False if it could not."""


class Unavailable(Exception):
    """An integration whose library is not installed: the argument is what to install."""


def chosen(environ: Mapping[str, str] = os.environ) -> tuple[list[str], list[dict[str, Any]]]:
    """The integrations `BARCA_TELEMETRY` names (known ones, in order, once each), and a
    warning for each unknown name."""
    names: list[str] = []
    warnings: list[dict[str, Any]] = []
    for name in (environ.get(VARIABLE) or "").split(","):
        name = name.strip().lower()
        if not name or name in names:
            continue
        if name in INTEGRATIONS:
            names.append(name)
        else:
            warnings.append(_warning(name, "unknown", f"set {VARIABLE} to one of "
                                     f"{', '.join(sorted(INTEGRATIONS))}, or unset it"))
    return names, warnings


def load(names: list[str]) -> tuple[list[Backend], list[dict[str, Any]]]:
    """The backends of `names`, and a warning for each one whose library is missing."""
    import importlib

    backends, warnings = [], []
    for name in names:
        try:
            backends.append(importlib.import_module(INTEGRATIONS[name]).backend())
        except Unavailable as missing:
            warnings.append(_warning(name, "missing", f"pip install '{missing}' in barca's "
                                     f"environment (and its workers'), or unset {VARIABLE}"))
    return backends, warnings


def _warning(name: str, problem: str, fix: str) -> dict[str, Any]:
    """A run's warning, as the engine's other warnings (barca.views.warning_text words it)."""
    return {"kind": "telemetry", "node": None, "param": None, "integration": name,
            "problem": problem, "fix": fix}


def run_trace(run_id: str, command: str, target: str, files: tuple[str, ...],
              triggered_by: str, environ: Mapping[str, str] = os.environ) -> tuple[Any, list]:
    """A run's trace (`NO_TRACE` when telemetry is off or nothing could load) and the
    warnings to say before it runs."""
    names, warnings = chosen(environ)
    if not names:
        return NO_TRACE, warnings
    backends, missing = load(names)
    if not backends:
        return NO_TRACE, warnings + missing
    from barca.telemetry.run_trace import RunTrace

    return RunTrace(backends, run_id, command, target, files, triggered_by), warnings + missing


class NoTrace:
    """What a run traces with telemetry off: nothing, at no cost."""

    def node_carrier(self, node_id: str) -> Carrier:
        return ()

    def outcome(self, outcome: Any, plan: Any) -> None:
        pass

    def finish(self, status: str, run: Any, kinds: Mapping[str, str]) -> list[dict]:
        return []


NO_TRACE = NoTrace()
