"""The coordinator: observe sensors, plan, dispatch steps, record results.

Scheduling policy: sensors in the cone run first (they only observe). Then every node is
planned; a node is dispatched once each node it reads is complete (all its keys cached or
finished), all its stale keys at once, in key order. A node whose plan depends on an output
(a cutoff asset's bytes, a key source's list or dict) is planned again when that output
exists. Ties break by node id, so the same inputs give the same order.

State, in `_Run`:
    states      node id -> NodeState (stored per-key state, plus older results found again)
    loaded      node id -> NodeState exactly as loaded; stored: what each snapshot row said
    plans       node id -> NodePlan (the latest decision for it)
    known       node id -> KnownOutput (outputs readers depend on: sensors, cutoff, key sources)
    pending     node id -> number of its keys still running or queued
    submitted   nodes whose stale keys were handed to the executor
    complete    nodes whose keys are all cached or finished
    results     node id -> key -> its position in the plan and its format, packed in one int
                (see state.ran_entry): memory per key stays small at 200,000 keys
    digests     node id -> key -> output digest, only for nodes whose readers need bytes
    failed_keys node id -> keys that failed or were skipped in this run (their readers skip them)
    failures    the StepOutcome of each failed key
    source_columns  the key sources' keys and values (engine.key_source_columns)
Finished steps are recorded in batches at most twice a second and then dropped, so a killed
run keeps all but the last half second of its work and memory does not grow with the run.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from barca.errors import Cancelled, InfraError
from barca.graph import Graph
from barca.packed_columns import HashColumn
from barca.plan.model import KnownOutput, NodePlan, Reason
from barca.plan.planner import plan_nodes, refreshed_nodes
from barca.project import Project
from barca.engine.events import Reporter
from barca.engine.executor import Executor, NewExecutor
from barca.engine.protocol import LogLine, StepOutcome
from barca.engine.missing_artifacts import missing_inputs, missing_target_keys
from barca.engine.request import RunRequest
from barca.engine.result import RunResult, locate
from barca.engine.key_source_columns import SourceColumns
from barca.engine.step_specs import blocked_keys, step_spec
from barca.state import EMPTY_STATE, ran_entry, state_after_run, unpack_entry
from barca.store import metadata
from barca.store.artifacts import read_value
from barca.store.db import checkpoint, connect, defer_checkpoint

FLUSH_SECONDS = 0.5
UNKNOWN_DIGEST = "0" * 32  # an output digest no bytes can have: readers treat it as changed


def execute(project: Project, graph: Graph, request: RunRequest, reporter: Reporter,
            new_executor: NewExecutor) -> RunResult:
    """Run a checked request; `new_executor` is called when a step first must run."""
    return _Run(project, graph, request, reporter, new_executor).go()


class _Run:
    """One run's coordinator state (see the module docstring); a plain class, built per run."""

    def __init__(self, project: Project, graph: Graph, request: RunRequest, reporter: Reporter,
                 new_executor: NewExecutor) -> None:
        self.project, self.graph, self.request = project, graph, request
        self.reporter, self.expr_keys = reporter, request.expr_keys
        self.new_executor = new_executor
        self.run_id = os.urandom(6).hex()
        self.plans: dict[str, NodePlan] = {}
        self.known: dict[str, KnownOutput] = {}
        self.pending: dict[str, int] = {}
        self.complete: set[str] = set()
        self.submitted: set[str] = set()
        self.results: dict[str, dict[str, int]] = {}
        self.digests: dict[str, dict[str, str]] = {}
        self.failed_keys: dict[str, list[str]] = {}
        self.skipped_keys: dict[str, list[str]] = {}
        self.failures: list[StepOutcome] = []
        self.executed = 0
        self.unrecorded: list[StepOutcome] = []
        self.logs: list[tuple] = []
        self.executor: Executor | None = None  # made on first need
        self.conn: Any = None
        self.scratch: Path | None = None
        self._reopened = False
        self.rewrite: set[str] = set()
        self.source_columns = SourceColumns()

    def go(self) -> RunResult:
        started = time.perf_counter()
        req = self.request
        self.cone = req.cone
        self.order = tuple(n for n in self.graph.order if n in self.cone)
        if not req.dry_run:
            self.project.ensure_state_dir()
        if req.observe_sensors and any(self.graph.nodes[n].kind == "sensor" for n in self.order):
            # a sensor always runs: start its worker now, so its imports overlap our planning
            self.executor = self.new_executor()
            self.executor.prestart()
        self.conn = connect(self.project.db_path, create=not req.dry_run)
        # sensors first: the rest of the state loads while they run
        sensors = [n for n in self.order if self.graph.nodes[n].kind == "sensor"]
        early = self.graph.cone(sensors) if sensors else frozenset()
        self.states, self.stored = metadata.load_states(
            self.conn, [n for n in self.order if n in early])
        self.loaded = dict(self.states)  # as stored: what a snapshot write is compared with
        self.refreshed = refreshed_nodes(self.graph, self.cone, req.options)
        if not req.dry_run:
            metadata.start_run(self.conn, self.run_id, req.command, req.files, req.target_text)
        self.stored_dir = self.artifacts_root = self.project.artifacts_dir
        if req.dry_run:
            import tempfile

            self.scratch = Path(tempfile.mkdtemp(prefix="barca-dry-run-"))
            self.artifacts_root = self.scratch
        # where steps write: root-relative when recorded, so that a project can move
        self.step_dirs = self.artifacts_root if self.scratch else \
            self.artifacts_root.relative_to(self.project.root)
        previous = {sig: signal.signal(sig, _raise_interrupt)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        status = "failed"
        try:
            self._observe_sensors(sensors, [n for n in self.order if n not in early])
            self._plan_pending()
            if req.dry_run:
                self._predict_missing_artifacts()
            else:
                self._execute()
            status = "dry_run" if req.dry_run else (
                "failed" if self.failures else "success")
        except KeyboardInterrupt:
            status = "cancelled"
            raise Cancelled("run cancelled", "rerun the same command; finished steps are kept")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._finish(status, time.perf_counter() - started)
        return self._result(status, time.perf_counter() - started)

    # -- sensors ----------------------------------------------------------------------------

    def _observe_sensors(self, sensors: list[str], later: list[str]) -> None:
        """Run the sensors; meanwhile load the state of the nodes they do not need (`later`),
        which at 200,000 keys takes as long as a sensor's query."""
        if sensors:
            self.plans = plan_nodes(self.graph, sensors, self.states, {},
                                    self.request.options, self.expr_keys, {})
            if self.request.observe_sensors:
                self.reporter.run_started(sum(len(self.plans[n].run) for n in sensors))
                self._dispatch(sensors)
        states, stored = metadata.load_states(self.conn, later)
        self.states.update(states)
        self.loaded.update(states)
        self.stored.update(stored)
        if not sensors:
            return
        if self.request.observe_sensors:
            if not self.request.dry_run:
                checkpoint(self.conn)  # the previous run's deferred one; the sensor is running
            self._drain(lambda: all(n in self.complete for n in sensors))
            return
        for node_id in sensors:
            state = self.states.get(node_id)
            if state is not None and all(state.find(k) is not None
                                         for k in self.plans[node_id].keys):
                self.known[node_id] = self._known_output(node_id, self.plans[node_id], {})
            self.complete.add(node_id)

    # -- planning ---------------------------------------------------------------------------

    def _plan_pending(self) -> None:
        """Plan every undecided node; repeat while a cached node reveals an output readers need."""
        while True:
            todo = [n for n in self.order
                    if n not in self.complete and n not in self.submitted
                    and (n not in self.plans or self.plans[n].unknown)]
            self.plans = plan_nodes(self.graph, todo, self.states, self.known,
                                    self.request.options, self.expr_keys, self.refreshed,
                                    self.plans)
            for node_id in todo:
                self._apply_history_hits(node_id)
            if not self._learn_cached_outputs(todo):
                return

    def _apply_history_hits(self, node_id: str) -> None:
        """Keys whose new run hash matches an older success are cached, not rerun."""
        plan = self.plans[node_id]
        wanted = [(plan.keys[i], plan.run_hashes[i]) for i in plan.run
                  if plan.reasons[i].code in ("changed", "never_run", "new_key")]
        if not wanted or plan.kind != "asset":
            return
        if node_id not in self.states and not metadata.has_success(self.conn, node_id):
            return  # a node that never succeeded has no older result to return to
        hits = metadata.find_successes(self.conn, node_id, wanted)
        if not hits:
            return
        self.rewrite.add(node_id)
        state = self.states.get(node_id, EMPTY_STATE)
        self.states[node_id] = state.with_records(hits)
        hit_keys = {record[0] for record in hits}
        run = tuple(i for i in plan.run if plan.keys[i] not in hit_keys)
        self.plans[node_id] = replace(plan, run=run,
                                      reasons={i: plan.reasons[i] for i in run})

    def _learn_cached_outputs(self, planned: Sequence[str]) -> bool:
        """Outputs of fully cached nodes that some reader depends on; True when any is new."""
        learned = False
        for node_id in planned:
            plan = self.plans[node_id]
            if plan.unknown or plan.run or node_id in self.known or not self.graph.output_read(
                    node_id):
                continue
            self.known[node_id] = self._known_output(node_id, plan, {})
            learned = True
        return learned

    def _known_output(self, node_id: str, plan: NodePlan, ran: Mapping[str, str]) -> KnownOutput:
        """Output digests per key, plus the keys (and values) a key source defines."""
        hashes = self._output_hashes(node_id, plan, ran)
        if not self.graph.is_key_source(node_id):
            return KnownOutput(hashes)
        keys, values = self.source_columns.columns(
            node_id, lambda: read_value(*self._artifact(node_id, "")))
        return KnownOutput(hashes, keys, values)

    def _output_hashes(self, node_id: str, plan: NodePlan, ran: Mapping[str, str]) -> HashColumn:
        """The digest of each key's bytes: this run's where a key ran, else the stored one.
        With the same keys as stored, only the keys that ran are touched."""
        state = self.states.get(node_id, EMPTY_STATE)
        positions = self.results.get(node_id, {})
        if state.output_hash is not None and all(k in positions for k in ran) and \
                state.keys == plan.keys:
            return state.output_hash.replaced({unpack_entry(positions[k])[0]: digest
                                               for k, digest in ran.items()})
        if len(plan.keys) > 16:
            state.keys.indexed()
        digests = [ran[k] if k in ran else state.output_hash_at(state.find(k))
                   for k in plan.keys]
        if not all(digests):  # e.g. cutoff=True was just added: look the digests up once
            found = metadata.output_hashes(self.conn, node_id, [
                (k, plan.run_hashes[i]) for i, k in enumerate(plan.keys) if not digests[i]])
            digests = [d or found.get(k) or UNKNOWN_DIGEST for d, k in zip(digests, plan.keys)]
            self.rewrite.add(node_id)
        return HashColumn(digests)

    # -- execution --------------------------------------------------------------------------

    def _execute(self) -> None:
        total = sum(len(p.run) for n, p in self.plans.items()
                    if n not in self.complete and not p.unknown)
        self.reporter.run_started(total)
        for node_id in self.order:
            plan = self.plans[node_id]
            if not plan.unknown and plan.cached_count:
                self.reporter.step_cached(node_id, plan.cached_count if plan.partitioned else 0)
            if node_id not in self.submitted and not plan.unknown and not plan.run:
                self.complete.add(node_id)
        self._check_target_outputs()
        self._dispatch_ready()
        self._drain(lambda: not self.pending)

    def _dispatch_ready(self) -> None:
        ready = []
        for node_id in self.order:
            if node_id in self.submitted or node_id in self.complete:
                continue
            plan = self.plans.get(node_id)
            if plan is None or plan.unknown:
                continue
            if all(up in self.complete for up in self.graph.upstream[node_id]) \
                    and self._inputs_on_disk(node_id):
                ready.append(node_id)
        if ready:
            self._dispatch(ready)
        elif self._reopened:
            self._reopened = False
            self._dispatch_ready()

    def _predict_missing_artifacts(self) -> None:
        """What a real run would recompute because a cached file it reads is gone."""
        self._check_target_outputs()
        for _ in range(len(self.order) + 1):
            self._reopened = False
            for node_id in reversed(self.order):
                plan = self.plans.get(node_id)
                if plan is not None and not plan.unknown and plan.run:
                    self._inputs_on_disk(node_id)
            if not self._reopened:
                return

    def _check_target_outputs(self) -> None:
        """A cached target whose file is gone is recomputed: its value is what the user asked
        for."""
        for node_id in self.request.targets:
            missing = missing_target_keys(node_id, self.plans[node_id], self._exists)
            if missing:
                self._recompute_missing(node_id, missing)

    def _inputs_on_disk(self, node_id: str) -> bool:
        """Cached inputs this node will read must still exist; a missing one is recomputed first."""
        missing = missing_inputs(self.graph, self.plans, node_id, self.failed_keys,
                                 self.results, self.complete, self._exists)
        for source, keys in missing.items():
            self._recompute_missing(source, keys)
        return not missing

    def _exists(self, node_id: str, key: str) -> bool:
        return self._artifact(node_id, key)[0].exists()

    def _recompute_missing(self, node_id: str, keys: Sequence[str]) -> None:
        plan = self.plans[node_id]
        index = {k: i for i, k in enumerate(plan.keys)}
        extra = sorted(index[k] for k in keys)
        for key in keys:
            self.reporter.warning(f"{node_id}: cached result of {key or 'the node'} is missing "
                                  f"({self._artifact(node_id, key)[0]}); computing it again")
        run = tuple(sorted(set(plan.run) | set(extra)))
        reasons = {**plan.reasons, **{i: Reason("artifact_missing") for i in extra}}
        self.plans[node_id] = replace(plan, run=run, reasons=reasons)
        self.complete.discard(node_id)
        self.submitted.discard(node_id)
        self._reopened = True

    def _dispatch(self, node_ids: Sequence[str]) -> None:
        steps = []
        for node_id in node_ids:
            plan = self.plans[node_id]
            self.submitted.add(node_id)
            blocked = blocked_keys(self.graph, plan, node_id, self.failed_keys)
            ran = self.results.get(node_id, {})
            keys = [i for i in plan.run if plan.keys[i] not in blocked and plan.keys[i] not in ran]
            if blocked:
                skipped = [k for k in (plan.keys[i] for i in plan.run) if k in blocked]
                self.failed_keys.setdefault(node_id, []).extend(skipped)
                self.skipped_keys.setdefault(node_id, []).extend(skipped)
            if not keys:
                self._node_done(node_id)
                continue
            self.pending[node_id] = len(keys)
            steps.append((node_id, plan, keys))
        count = sum(len(keys) for _, _, keys in steps)
        if count:
            if self.executor is None:
                self.executor = self.new_executor()
            sources = [n for n, _, _ in steps if self.graph.is_key_source(n)]
            self.source_columns.read_digests(self.conn, sources)
            self.executor.submit((step_spec(self.graph, self.plans, node_id, plan, i,
                                            self.step_dirs, self._artifact,
                                            self.source_columns.known(node_id))
                                  for node_id, plan, keys in steps for i in keys), count)
            self.source_columns.load(self.conn, sources)  # while their steps run

    def _artifact(self, node_id: str, key: str) -> tuple[Path, str]:
        found = locate(self.graph.nodes[node_id], key, self.plans[node_id],
                       self.results.get(node_id, {}), self.states.get(node_id, EMPTY_STATE),
                       self.artifacts_root, self.stored_dir)
        if found is None:
            raise InfraError(f"no recorded result for {node_id} {key}".strip())
        return found

    def _drain(self, finished) -> None:
        assert self.executor is not None or finished()
        last_flush = time.monotonic()
        total = sum(self.pending.values())
        done = 0
        while not finished():
            for event in self.executor.events(FLUSH_SECONDS):
                if isinstance(event, LogLine):
                    self.logs.append((len(self.logs), event.step_id, event.stream,
                                      time.time(), event.text))
                    self.reporter.step_output(event.step_id, event.stream, event.text)
                    continue
                done += 1
                self._on_outcome(event)
                self.reporter.step_finished(event, done, max(total, done))
            if time.monotonic() - last_flush >= FLUSH_SECONDS:
                self._flush()
                last_flush = time.monotonic()
        self._flush()

    def _on_outcome(self, outcome: StepOutcome) -> None:
        self.executed += 1
        if not self.request.dry_run:
            self.unrecorded.append(outcome)
        node_id = outcome.node_id
        if outcome.status == "success":
            self.results.setdefault(node_id, {})[outcome.key] = ran_entry(outcome.index,
                                                                          outcome.format)
            if self.graph.output_read(node_id):
                self.digests.setdefault(node_id, {})[outcome.key] = outcome.output_hash
            if outcome.key_columns is not None:
                self.source_columns.take(node_id, outcome.key_columns)
        else:
            self.failures.append(outcome)
            self.failed_keys.setdefault(node_id, []).append(outcome.key)
        self.pending[node_id] -= 1
        if self.pending[node_id] == 0:
            del self.pending[node_id]
            self._node_done(node_id)

    def _node_done(self, node_id: str) -> None:
        self.complete.add(node_id)
        if self.graph.output_read(node_id) and node_id not in self.failed_keys:
            plan = self.plans[node_id]
            self.known[node_id] = self._known_output(node_id, plan,
                                                     self.digests.get(node_id, {}))
            if self.graph.nodes[node_id].kind != "sensor":
                self._plan_pending()
                for n in self.order:
                    p = self.plans.get(n)
                    if n not in self.submitted and p is not None and not p.unknown and not p.run:
                        self.complete.add(n)
        self._dispatch_ready()

    def _flush(self) -> None:
        if self.logs and not self.request.dry_run:
            metadata.insert_logs(self.conn, self.run_id, self.logs)
            self.logs = []
        if not self.unrecorded:
            return
        metadata.record(self.conn, self.run_id, self.unrecorded, self.plans)
        self.unrecorded = []

    # -- end of run -------------------------------------------------------------------------

    def _finish(self, status: str, elapsed: float) -> None:
        if self.executor is not None:
            self.executor.close(cancel=status == "cancelled")
        if self.scratch is not None:
            import shutil

            shutil.rmtree(self.scratch, ignore_errors=True)
        if self.request.dry_run or self.conn is None:
            return
        self._flush()
        executed = self.executed
        total_keys = sum(len(p.keys) for p in self.plans.values() if not p.unknown)
        failed = self.failures
        metadata.finish_run(self.conn, self.run_id, status, total_keys, executed,
                            max(0, total_keys - executed), elapsed,
                            failed[0].step_id if failed else None,
                            failed[0].error_message if failed else None)
        defer_checkpoint(self.conn)
        self._save_states()
        self.source_columns.save(self.conn)
        self.reporter.run_finished(executed, executed, elapsed, status)

    def _save_states(self) -> None:
        """Write each node's new snapshot, so the next run compares whole columns again."""
        updates = {}
        for node_id in self.order:
            plan = self.plans.get(node_id)
            if plan is None or plan.unknown:
                continue
            old = self.states.get(node_id, EMPTY_STATE)
            ran = self.results.get(node_id, {})
            failed = {o.key: [o.run_hash, o.error_message] for o in self.failures
                      if o.node_id == node_id}
            replayed = self.stored.get(node_id, metadata.NOT_STORED).replayed
            if not ran and not failed and node_id not in self.rewrite and not replayed and \
                    old.run_hash == plan.run_hashes and old.keys == plan.keys:
                continue
            updates[node_id] = state_after_run(
                plan, old, ran, self.digests.get(node_id, {}), failed,
                keep_output_hash=self.graph.output_read(node_id),
                whole=not self.request.options.partition)
        metadata.save_states(self.conn, updates, self.loaded, self.stored, self.run_id)

    def _result(self, status: str, elapsed: float) -> RunResult:
        executed = self.executed
        total_keys = sum(len(p.keys) for p in self.plans.values() if not p.unknown)
        depth: dict[str, int] = {}
        for n in self.order:
            ran = n in self.results or n in self.failed_keys and n not in self.skipped_keys
            base = max((depth.get(u, 0) for u in self.graph.upstream[n]), default=0)
            depth[n] = base + (1 if ran else 0)
        phases = len({depth[n] for n in self.order if n in self.results or n in self.failed_keys})
        failed = self.failures
        skipped = dict(self.skipped_keys)
        for node_id in self.order:
            plan = self.plans.get(node_id)
            if plan is not None and plan.unknown and failed:
                skipped[node_id] = []
        return RunResult(self.run_id, self.request.targets, self.request.options, status,
                         elapsed, self.graph,
                         self.cone, self.order, self.plans, self.states, self.results,
                         failed, skipped,
                         executed, max(0, total_keys - executed), phases,
                         self.project.artifacts_dir, self.project.root)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
