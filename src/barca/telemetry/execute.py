"""The worker's span: one `barca.execute` per step, or per batch call (with
`barca.batch.keys`, the number of keys it computed together), a child of its node's
`barca.step` span in the coordinator's trace. A step spec carries that span's context only
when the run traces (telemetry.run_trace), so an untraced run never reaches this module.

The span is the current one while the function runs: a step's own spans (made with the same
library) join the run's trace under it. Each integration is loaded once per process; its
library sends what it holds when the process exits (worker processes run exit handlers).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

from barca.telemetry import Backend, Carrier, Error, Unavailable

_loaded: dict[str, Backend | None] = {}  # integration -> its backend, None if missing here
# where this process runs, on each of its spans (a Ray worker's node: engine.worker.ray_lease)
PLACE: dict[str, Any] = {}


def traced(step: Any, carrier: Carrier, run: Callable[[], list]) -> list:
    """`run()` (which runs `step`, a StepSpec or a CallSpec, and returns its outcomes) inside
    a `barca.execute` span per integration `carrier` names; its outcomes say how it went."""
    spans = []
    for name, headers in carrier:
        backend = _backend(name)
        if backend is not None:
            spans.append((backend, backend.start("barca.execute", backend.extract(headers),
                                                 step.node_id)))
    began = time.perf_counter()
    outcomes: list = []
    try:
        with contextlib.ExitStack() as active:
            for backend, span in spans:
                manager = backend.activate(span)
                if manager is not None:
                    active.enter_context(manager)
            outcomes = run()
        return outcomes
    finally:
        attributes, error = _summary(step, outcomes, time.perf_counter() - began)
        attributes.update(PLACE)
        for backend, span in spans:
            backend.end(span, attributes, error)


def lost(step: Any, started: float, error: Error, where: dict[str, Any]) -> None:
    """The `barca.execute` span of a step whose worker was lost (or killed at its timeout)
    before it could end its own: from `started` (epoch seconds) to now, with `error`, made
    where the loss was seen (the coordinator); `where`: what is known of the lost place."""
    for name, headers in step.trace:
        backend = _backend(name)
        if backend is not None:
            span = backend.start("barca.execute", backend.extract(headers), step.node_id,
                                 started)
            backend.end(span, {"barca.node_id": step.node_id, "barca.step_id": step.step_id,
                               "barca.outcome": "lost", **where}, error)


def flush(timeout: float) -> None:
    """Send the spans this process holds now, waiting at most `timeout` seconds for each
    integration: for a worker that lives on after its steps (a Ray worker)."""
    for backend in _loaded.values():
        if backend is not None:
            backend.flush(timeout)


def _backend(name: str) -> Backend | None:
    if name not in _loaded:
        import importlib

        from barca.telemetry import INTEGRATIONS

        try:
            _loaded[name] = importlib.import_module(INTEGRATIONS[name]).backend()
        except (Unavailable, KeyError):  # the coordinator had it, this worker has not
            _loaded[name] = None
    return _loaded[name]


def _summary(step: Any, outcomes: list, seconds: float) -> tuple[dict, Any]:
    """The span's attributes and error from the step's outcomes: a step's one outcome; a
    batch call's `CallFinished` (how many keys it wrote, its peak memory) after the outcomes
    of the keys it did not write (those it wrote went out as they were written)."""
    keys = [o for o in outcomes if hasattr(o, "status")]
    failed = [o for o in keys if o.status != "success"]
    attributes: dict[str, Any] = {"barca.node_id": step.node_id, "barca.step_id": step.step_id,
                                  "barca.seconds": round(seconds, 6)}
    call = next((o for o in outcomes if not hasattr(o, "status")), None)
    if getattr(step, "batch", None) is None:
        ran = bool(keys) and not failed
        attributes.update({"barca.run_hash": step.run_hash,
                           "barca.attempts": keys[0].attempts if keys else None,
                           "barca.max_rss_bytes": keys[0].max_rss_bytes if keys else None,
                           "barca.cpu_seconds": keys[0].cpu_seconds if keys else None})
    else:
        ran = call is not None and call.written == call.keys
        attributes.update({"barca.batch": step.batch, "barca.batch.keys": len(step.keys),
                           "barca.batch.written": call.written if call else None,
                           "barca.attempts": call.attempts if call else None,
                           "barca.max_rss_bytes": call.max_rss_bytes if call else None})
    attributes["barca.outcome"] = "ran" if ran else "failed"
    error = None
    if failed:
        first = failed[0]
        error = (first.error_type or "Error", first.error_message or "", first.traceback or "")
    elif not ran:
        error = ("Interrupted", "the step ended without an outcome", "")
    return attributes, error
