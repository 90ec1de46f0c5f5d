"""The coordinator's spans of one run: `barca.run` at the root, a `barca.step` per node of the
cone, a `barca.partition` per executed key of a partitioned node; the workers' `barca.execute`
spans (telemetry.execute) join them under their node's `barca.step`, whose context each step
spec carries.

A node's span opens when its first steps are handed out and ends with its last outcome; a node
with nothing to run (all cached, or never reached) gets a span of no length at the run's
start. What they say: the run's id, command, target, trigger and status; per node its kind,
outcome (ran, cached, failed, skipped), key counts, whether it was a cache hit and why its keys
ran (stale reason codes); per executed key (or on the node's span, unpartitioned) its run hash,
stale reason, attempts, bytes, CPU and peak memory, and its error. Cached keys get no span.
Partition spans are bounded, as 200,000 keys would drown a trace: at most `KEYS_PER_NODE` per
node and `KEYS_PER_RUN` per run, failed keys always; the node's span counts the rest.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Mapping

from barca.telemetry import Backend, Carrier, Error

KEYS_PER_NODE = 200
KEYS_PER_RUN = 2000
FLUSH_SECONDS = 3.0  # what a run waits at its end for each integration to take its spans


class _Node:
    """A node's spans (one per backend) and what its executed keys added up to."""

    def __init__(self, spans: list[Any], carrier: Carrier) -> None:
        self.spans, self.carrier = spans, carrier
        self.keys_traced = 0
        self.failed = 0
        self.max_rss = 0
        self.last = 0.0  # when its last outcome came
        self.first: Any = None  # an unpartitioned node's outcome, told on its own span
        self.opened: float | None = None  # when it opened, if not as it was handed out


class RunTrace:
    def __init__(self, backends: list[Backend], run_id: str, command: str, target: str,
                 files: tuple[str, ...], triggered_by: str) -> None:
        self.backends = backends
        self.attributes = {"barca.run_id": run_id, "barca.command": command,
                           "barca.target": target, "barca.files": ",".join(files),
                           "barca.trigger": triggered_by}
        self.started = time.time()
        resource = f"{command} {target}"
        self.roots = [b.start("barca.run", None, resource, self.started) for b in backends]
        self.nodes: dict[str, _Node] = {}
        self.keys_traced = 0

    def node_carrier(self, node_id: str) -> Carrier:
        """The trace context a node's steps carry to their workers (its span opens now)."""
        return self._node(node_id).carrier

    def _node(self, node_id: str, start: float | None = None) -> _Node:
        node = self.nodes.get(node_id)
        if node is None:
            spans = [b.start("barca.step", root, node_id, start)
                     for b, root in zip(self.backends, self.roots)]
            carrier = tuple((b.name, b.inject(s)) for b, s in zip(self.backends, spans))
            node = self.nodes[node_id] = _Node(spans, carrier)
            node.opened = start
        return node

    def outcome(self, outcome: Any, plan: Any) -> None:
        """A key ran (a `StepOutcome`): its span, within the bounds, for a partitioned node;
        an unpartitioned node's outcome goes on the node's span when it ends."""
        node = self._node(outcome.node_id)
        node.last = now = time.time()
        failed = outcome.status != "success"
        node.failed += failed
        node.max_rss = max(node.max_rss, outcome.max_rss_bytes or 0)
        if not plan.partitioned:
            node.first = outcome
            return
        if not failed and (node.keys_traced >= KEYS_PER_NODE or
                           self.keys_traced >= KEYS_PER_RUN):
            return
        node.keys_traced += 1
        self.keys_traced += 1
        attributes = {"barca.node_id": outcome.node_id, "barca.partition":
                      plan.label(outcome.key), **_key_attributes(outcome, plan)}
        for backend, parent in zip(self.backends, node.spans):
            span = backend.start("barca.partition", parent, outcome.node_id,
                                 now - outcome.elapsed_seconds)
            backend.end(span, attributes, _error(outcome), now)

    def finish(self, status: str, run: Any, kinds: Mapping[str, str]) -> list[dict]:
        """End every node's span and the run's (`run`: the engine's RunState), then send
        them; a warning for each integration that could not take them in time."""
        for node_id in run.order:
            plan = run.plans.get(node_id)
            if plan is not None:
                self._end_node(node_id, plan, kinds[node_id], status)
        failed = run.failures[0] if run.failures else None
        attributes = {**self.attributes, "barca.status": status,
                      "barca.steps.total": run.total_keys(), "barca.steps.executed":
                      run.executed, "barca.steps.cached": run.cached_keys(),
                      "barca.steps.failed": len(run.failures),
                      "barca.failed_node_id": failed.node_id if failed else None}
        error = None
        if status != "success":
            error = ("Cancelled", "run cancelled", "") if status == "cancelled" else \
                ("RunFailed", f"{failed.step_id}: {failed.error_message}" if failed
                 else "run failed", "")
        warnings = []
        for backend, root in zip(self.backends, self.roots):
            backend.end(root, attributes, error)
            if not backend.flush(FLUSH_SECONDS):
                warnings.append({"kind": "telemetry", "node": None, "param": None,
                                 "integration": backend.name, "problem": "undelivered",
                                 "run_id": self.attributes["barca.run_id"],
                                 "fix": f"check that its receiver is up and reachable "
                                        f"({_receiver(backend.name)})"})
        return warnings

    def _end_node(self, node_id: str, plan: Any, kind: str, status: str) -> None:
        node = self._node(node_id, start=self.started)  # never handed out: at the start
        executed = len(plan.run) if not plan.unknown else 0
        keys = len(plan.keys) if not plan.unknown else 0
        reasons = Counter(plan.reasons[i].code for i in plan.run if i in plan.reasons) \
            if not plan.unknown else Counter()
        outcome = "failed" if node.failed else "cancelled" if status == "cancelled" and \
            executed else "ran" if executed else "skipped" if plan.unknown else "cached"
        attributes = {"barca.node_id": node_id, "barca.kind": kind, "barca.outcome": outcome,
                      "barca.cached": executed == 0 and not plan.unknown,
                      "barca.keys": keys, "barca.keys.executed": executed,
                      "barca.keys.cached": keys - executed, "barca.keys.failed": node.failed,
                      "barca.stale_reasons": ", ".join(f"{code}:{n}" for code, n in
                                                       sorted(reasons.items())) or None,
                      "barca.max_rss_bytes": node.max_rss or None}
        error = ("StepFailed", f"{node.failed} of {executed} keys failed", "") \
            if node.failed else None
        if node.first is not None:
            attributes.update(_key_attributes(node.first, plan))
            error = _error(node.first)
        elif not plan.unknown and not plan.partitioned and plan.run_hashes:
            attributes["barca.run_hash"] = plan.run_hashes[0]
        for backend, span in zip(self.backends, node.spans):
            backend.end(span, attributes, error, node.last or node.opened)


def _key_attributes(outcome: Any, plan: Any) -> dict[str, Any]:
    reason = plan.reasons.get(outcome.index)
    return {"barca.run_hash": outcome.run_hash, "barca.cached": False,
            "barca.outcome": "ran" if outcome.status == "success" else "failed",
            "barca.stale_reason": reason.code if reason else None,
            "barca.stale_changed": ", ".join(reason.changed) if reason and reason.changed
            else None,
            "barca.attempts": outcome.attempts, "barca.bytes": outcome.size_bytes,
            "barca.cpu_seconds": outcome.cpu_seconds,
            "barca.max_rss_bytes": outcome.max_rss_bytes, "barca.batch": outcome.batch}


def _error(outcome: Any) -> Error | None:
    if outcome.status == "success":
        return None
    return (outcome.error_type or "Error", outcome.error_message or "",
            outcome.traceback or "")


def _receiver(name: str) -> str:
    return "DD_TRACE_AGENT_URL, or DD_AGENT_HOST and DD_TRACE_AGENT_PORT" if name == "datadog" \
        else "OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
