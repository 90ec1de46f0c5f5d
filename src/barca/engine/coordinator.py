"""The coordinator: observe sensors, have the run planned, dispatch steps, record results.

Scheduling policy: sensors in the cone run first (they only observe). Then every node is
planned (engine.planning); a node is dispatched once each node it reads is complete (all its
keys cached or finished), all its stale keys at once, in key order. A node whose plan depends
on an output (a cutoff asset's bytes, a key source's list or dict) is planned again when that
output exists. Ties break by node id, so the same inputs give the same order.

Dispatch is one loop: take what the executor reports, record it, then advance (plan what
became decidable, dispatch what became ready) until nothing changes, and wait again. The run's
state is one `RunState`. Finished steps are recorded in batches at most twice a second and
then dropped, so a killed run keeps all but the last half second of its work and memory does
not grow with the run.

Other runs on the same project are met through the metadata database (engine.concurrent_runs):
an asset step another run is computing is not submitted but waited for, while the rest of the
run goes on, and then served from that run's result.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable, Iterator, Sequence

from barca.engine.events import Reporter
from barca.engine.executor import Executor, NewExecutor
from barca.engine.key_source_columns import SourceColumns
from barca.engine.planning import Planning
from barca.engine.batch_calls import BatchCalls
from barca.engine.byte_checks import changed_bytes
from barca.engine.log_cap import LogCap
from barca.engine.protocol import (CallFinished, CallSpec, LogLine, RunInterrupted, StepOutcome,
                                   StepSpec)
from barca.engine.request import RunRequest
from barca.engine.result import RunResult
from barca.engine.run_state import RunState
from barca.engine.concurrent_runs import Claim, StepLeases, Steps
from barca.engine.step_specs import blocked_keys, call_spec, step_spec
from barca.engine.still_running import StillRunning
from barca.errors import Cancelled, UsageError
from barca.graph import Graph
from barca.plan.planner import refreshed_nodes
from barca.project import Project
from barca.state import EMPTY_STATE, ran_entry, state_after_run, unpack_entry
from barca.store import metadata
from barca.store.artifact_store import ArtifactStore
from barca.store.db import checkpoint, connect, defer_checkpoint
from barca.store.local_store import LocalStore

FLUSH_SECONDS = 0.5
TABLE_FORMATS = ("parquet", "csv")  # a forced one falls back to pickle for other values


def execute(project: Project, graph: Graph, request: RunRequest, reporter: Reporter,
            new_executor: NewExecutor, run_id: str | None = None,
            triggered_by: str = "cli", warnings: Sequence[dict] = (),
            schedule: tuple[str, float] | None = None,
            store: ArtifactStore | None = None) -> RunResult:
    """Run a checked request; `new_executor` is called when a step first must run.
    `warnings`: said already (the caller's), kept in the result with the run's own;
    `schedule`: (schedule id, tick time) of a run a schedule started, recorded with it;
    `store`: where results live (default: the project's local store, `.barca/artifacts/`)."""
    store = store or LocalStore.of_project(project.root, project.artifacts_dir)
    run = _Run(project, graph, request, reporter, new_executor, run_id, triggered_by, store)
    run.schedule = schedule
    run.warnings.extend(warnings)
    return run.go()


class _Run:
    """One run: its request, its `RunState`, the executor and the database connection."""

    def __init__(self, project: Project, graph: Graph, request: RunRequest, reporter: Reporter,
                 new_executor: NewExecutor, run_id: str | None, triggered_by: str,
                 store: ArtifactStore) -> None:
        self.project, self.graph, self.request, self.store = project, graph, request, store
        self.reporter, self.new_executor = reporter, new_executor
        self.run_id = run_id or os.urandom(6).hex()
        self.triggered_by = triggered_by
        self.schedule: tuple[str, float] | None = None
        self.executor: Executor | None = None  # made on first need
        self.conn: Any = None
        self.recorded = False  # its row is written: it ends recorded
        self.scratch: ArtifactStore | None = None  # a dry run's sensors write here
        self.unrecorded: list[StepOutcome] = []
        self.logs: list[tuple] = []
        self.log_count = 0
        self.log_cap = LogCap()  # what of the steps' output is stored
        # how the metadata records a result's store key: as its path in the project's local
        # layout (`artifact_path` in JSON), whichever store holds it
        self.recorded_dir = project.artifacts_dir.relative_to(project.root).as_posix()
        self.batches = BatchCalls(graph, project.root, request.options.batch)
        self.metadata_seconds = 0.0  # handling finished keys and writing the metadata DB
        self.source_columns = SourceColumns()
        self.warnings: list[dict] = []  # {kind, node, param, message}, each said on stderr
        self.bytes_changed: dict[str, list[str]] = {}  # node id -> keys with new bytes
        # BARCA_PROGRESS_SECS is checked before the run's row, and only where steps can run
        # (not `barca status`, which observes no sensor)
        self.still_running = StillRunning(reporter) if request.observe_sensors else None

    def go(self) -> RunResult:
        started = time.perf_counter()
        req = self.request
        order = tuple(n for n in self.graph.order if n in req.cone)
        if not req.dry_run:
            self.project.ensure_state_dir()
        self.conn = connect(self.project.db_path, create=not req.dry_run)
        if req.observe_sensors:  # a get or run, not an inspection predicting one
            self._check_manual_computed(order)
        if req.observe_sensors and any(self.graph.nodes[n].kind == "sensor" for n in order):
            # a sensor always runs: start its worker now, so its imports overlap our planning
            self.executor = self.new_executor()
            self.executor.prestart()
        if req.dry_run:
            self.scratch = self.store.scratch()
        run = self.run = RunState(order, self.store, self.scratch or self.store)
        # sensors first: the rest of the state loads while they run
        sensors = [n for n in order if self.graph.nodes[n].kind == "sensor"]
        early = self.graph.cone(sensors) if sensors else frozenset()
        run.states, run.stored = metadata.load_states(self.conn, [n for n in order if n in early])
        run.loaded = dict(run.states)
        run.refreshed = refreshed_nodes(self.graph, req.cone, req.options)
        self.planning = Planning(self.graph, req.options, req.expr_keys, run, self.conn,
                                 self.source_columns, self.reporter)
        self.leases = StepLeases(self.conn, self.run_id, self.graph, run,
                                 active=not req.dry_run)
        declared = {n: {name: req.options.env.get(name) for name in self.graph.nodes[n].env}
                    for n in order if self.graph.nodes[n].env}
        if declared:
            self.reporter.declared_env(declared)
        previous = {sig: signal.signal(sig, _raise_interrupt)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        status = "failed"
        try:  # from its first row on, a run ends recorded, interrupted or not
            if not req.dry_run:  # refused (exit 2, nothing written) if the id is taken
                metadata.start_run(self.conn, self.run_id, req.command, req.files,
                                   req.target_text, self.triggered_by,
                                   ",".join(sorted(req.targets)) or "all", self.schedule)
                self.recorded = True
            # after the row: a server answers a run accepted once it is recorded (or queued)
            self.reporter.run_accepted()
            self._observe_sensors(sensors, [n for n in order if n not in early])
            self.planning.plan_pending()
            if req.dry_run:
                self.planning.predict_missing(req.targets)
                self.batches.plan_dry_run(run.plans)
            else:
                self._execute()
            status = "dry_run" if req.dry_run else ("failed" if run.failures else "success")
        except KeyboardInterrupt:
            status = "cancelled"
            raise Cancelled("run cancelled", "rerun the same command; finished steps are kept")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self._finish(status, time.perf_counter() - started)
        return self._result(status, time.perf_counter() - started)

    def _check_manual_computed(self, order: Sequence[str]) -> None:
        """A Manual asset is computed only when `--refresh` names it: one that has no result
        yet cannot be read, and nothing runs until it is refreshed once."""
        refreshed = refreshed_nodes(self.graph, self.request.cone, self.request.options)
        for node_id in order:
            d = self.graph.nodes[node_id]
            if d.pinned and node_id not in refreshed and \
                    not metadata.has_success(self.conn, node_id):
                words = ["barca", self.request.command, self.request.target_text or "",
                         *self.request.files, "--refresh", d.name]
                raise UsageError(
                    f"'{node_id}' has freshness=Manual and has never been computed; barca "
                    "computes it only when --refresh names it",
                    "compute it once: " + " ".join(w for w in words if w))

    # -- sensors ----------------------------------------------------------------------------

    def _observe_sensors(self, sensors: list[str], later: list[str]) -> None:
        """Run the sensors; meanwhile load the state of the nodes they do not need (`later`),
        which at 200,000 keys takes as long as a sensor's query."""
        run = self.run
        if sensors:
            self.planning.plan(sensors)
            if self.request.observe_sensors:
                self.reporter.run_started(sum(len(run.plans[n].run) for n in sensors))
                self._dispatch(sensors)
        states, stored = metadata.load_states(self.conn, later)
        run.states.update(states)
        run.loaded.update(states)
        run.stored.update(stored)
        if not sensors:
            return
        if self.request.observe_sensors:
            if not self.request.dry_run:
                checkpoint(self.conn)  # the previous run's deferred one; the sensor is running
            self._drain(lambda: all(n in run.complete for n in sensors), advance=False)
            return
        for node_id in sensors:  # predict from each sensor's last recorded output
            state = run.states.get(node_id)
            if state is not None and all(state.find(k) is not None
                                         for k in run.plans[node_id].keys):
                run.known[node_id] = self.planning.known_output(node_id, {})
            run.complete.add(node_id)

    # -- execution --------------------------------------------------------------------------

    def _execute(self) -> None:
        run = self.run
        total = sum(len(p.run) for n, p in run.plans.items()
                    if n not in run.complete and not p.unknown)
        self.reporter.run_started(total)
        for node_id in run.order:
            plan = run.plans[node_id]
            if not plan.unknown and plan.cached_count:
                self.reporter.step_cached(node_id, plan.cached_count if plan.partitioned else 0)
        self.planning.check_targets(self.request.targets)
        self.batches.check_groups(run.plans)
        self._advance()
        self._drain(lambda: not run.pending, advance=True)

    def _advance(self) -> None:
        """Dispatch every node whose inputs are complete, until nothing changes: a dispatch
        can complete a node at once (every key blocked), and a missing cached input plans its
        source again."""
        run = self.run
        while True:
            ready, reopened = [], False
            for node_id in run.order:
                plan = run.plans.get(node_id)
                if node_id in run.submitted or node_id in run.complete or plan is None or \
                        plan.unknown:
                    continue
                if all(up in run.complete for up in self.graph.upstream[node_id]):
                    if self.planning.inputs_present(node_id):
                        ready.append(node_id)
                    else:
                        reopened = True
            finished_at_once = self._dispatch(ready)
            if not finished_at_once and not reopened:
                return

    def _dispatch(self, node_ids: Sequence[str]) -> bool:
        """Hand the nodes' runnable keys to the executor; True if a node had none (it is
        complete now)."""
        run = self.run
        steps, finished = [], False
        for node_id in node_ids:
            plan = run.plans[node_id]
            run.submitted.add(node_id)
            blocked = blocked_keys(self.graph, plan, node_id, run.failed_keys)
            ran = run.results.get(node_id, {})
            keys = [i for i in plan.run if plan.keys[i] not in blocked and plan.keys[i] not in ran]
            if blocked:
                skipped = [k for k in (plan.keys[i] for i in plan.run) if k in blocked]
                run.failed_keys.setdefault(node_id, []).extend(skipped)
                run.skipped_keys.setdefault(node_id, []).extend(skipped)
            if not keys:
                self._node_finished(node_id)
                finished = True
                continue
            run.pending[node_id] = len(keys)
            steps.append((node_id, plan, keys))
        if steps:
            finished |= self._take(self.leases.claim(steps))
        return finished

    def _take(self, claim: Claim) -> bool:
        """Submit what this run computes, serve what other runs computed meanwhile; True if
        that completed a node."""
        for node_id, keys, owner in claim.waiting:
            self.reporter.steps_waiting(node_id, keys if self.run.plans[node_id].partitioned
                                        else 0, owner.run_id, owner.pid)
        finished = False
        for node_id, hits in claim.served.items():
            finished |= self._serve(node_id, hits)
        self._submit(claim.submit)
        return finished

    def _submit(self, steps: Steps) -> None:
        count = sum(len(keys) for _, _, keys in steps)
        if not count:
            return
        if self.executor is None:
            self.executor = self.new_executor()
        sources = [n for n, _, keys in steps if keys and self.graph.is_key_source(n)]
        self.source_columns.read_digests(self.conn, sources)
        calls = {node_id: self.batches.group(node_id, plan, keys)
                 for node_id, plan, keys in steps if node_id in self.request.options.batch}
        for node_id, _, keys in steps:
            if keys:
                self.reporter.steps_submitted(node_id, len(keys), len(calls[node_id])
                                              if node_id in calls else None)
        count = sum(len(calls[n]) if n in calls else len(keys) for n, _, keys in steps)
        self.executor.submit(self._specs(steps, calls), count)
        self.source_columns.load(self.conn, sources)  # while their steps run

    def _specs(self, steps: Steps, calls: dict) -> Iterator[StepSpec | CallSpec]:
        """The steps to run, made as the executor draws them: one per key, or one per call."""
        store = self.store.address
        scratch = self.scratch.address if self.scratch is not None else ""
        for node_id, plan, keys in steps:
            if node_id not in calls:
                known = self.source_columns.known(node_id)
                sensor = self.graph.nodes[node_id].kind == "sensor"
                for i in keys:
                    previous = self.planning.last_observation(node_id, plan.keys[i]) \
                        if sensor else None
                    yield step_spec(self.graph, self.run.plans, node_id, plan, i, store,
                                    scratch, self.planning.artifact, known, previous)
                continue
            for indices in calls[node_id]:
                yield call_spec(self.graph, self.run.plans, node_id, plan, indices,
                                self.batches.next_id(), store, self.planning.artifact)

    def _serve(self, node_id: str, hits: list) -> bool:
        """Keys another run computed while this one waited (or planned): cached now; True
        when they were the node's last pending keys."""
        run = self.run
        self.planning.apply_served(node_id, [hit.record for hit in hits])
        by_run = run.served.setdefault(node_id, {})
        for hit in hits:
            by_run[hit.run_id] = by_run.get(hit.run_id, 0) + 1
        self.reporter.step_cached(node_id, len(hits) if run.plans[node_id].partitioned else 0)
        run.pending[node_id] -= len(hits)
        if run.pending[node_id]:
            return False
        del run.pending[node_id]
        self._node_finished(node_id)
        return True

    def _drain(self, finished: Callable[[], bool], advance: bool) -> None:
        """Take events until `finished()`; with `advance`, dispatch what they made ready."""
        assert self.executor is not None or finished() or self.leases.waiting_count()
        last_flush = time.monotonic()
        total = sum(self.run.pending.values())
        done = 0
        while not finished() or self.batches.open:  # a call's end follows its last key
            completed = False
            for event in self._events():
                if isinstance(event, CallFinished):
                    self.batches.finished(event)
                    continue
                if isinstance(event, LogLine):
                    kept = self.log_cap.admit(event.step_id, event.text)
                    if kept is not None:
                        self.log_count += 1  # the line's place in the run, across flushes
                        self.logs.append((self.log_count, event.step_id, event.stream,
                                          time.time(), kept))
                    self.reporter.step_output(event.step_id, event.stream, event.text)
                    continue
                done += 1
                completed |= self._on_outcome(event)
                self.reporter.step_finished(event, done, max(total, done))
                for message in event.sink_errors:
                    self._sink_failed(event.step_id, message)
            if self.still_running is not None:
                self.still_running.check(self.executor)
            if self.leases.poll_in() == 0:
                completed |= self._take(self.leases.poll())
            if completed and advance:
                self._advance()
            if time.monotonic() - last_flush >= FLUSH_SECONDS:
                self._flush()
                last_flush = time.monotonic()
        self._flush()

    def _sink_failed(self, step_id: str, message: str) -> None:
        """A sink that could not be written: said now, and kept with the step's output."""
        self.reporter.sink_failed(step_id, message)
        self.log_count += 1
        self.logs.append((self.log_count, step_id, "stderr", time.time(),
                          f"[barca] SINK FAILED: {message}"))

    def _events(self) -> list:
        """What the executor reports, waiting at most until the next flush or the next look at
        steps other runs hold; with nothing of its own in flight, the run just sleeps."""
        timeout = FLUSH_SECONDS
        poll_in = self.leases.poll_in()
        if poll_in is not None:
            timeout = min(timeout, poll_in)
            if sum(self.run.pending.values()) == self.leases.waiting_count():
                time.sleep(timeout)
                return []
        return self.executor.events(timeout)

    def _on_outcome(self, outcome: StepOutcome) -> bool:
        """Record one outcome; True when it was its node's last pending key."""
        began = time.perf_counter()
        try:
            return self._take_outcome(outcome)
        finally:
            self.metadata_seconds += time.perf_counter() - began

    def _take_outcome(self, outcome: StepOutcome) -> bool:
        run = self.run
        run.executed += 1
        if not self.request.dry_run:
            self.unrecorded.append(outcome)
        node_id = outcome.node_id
        spent = run.step_times.get(node_id, (0.0, 0))
        run.step_times[node_id] = (spent[0] + outcome.elapsed_seconds,
                                   max(spent[1], outcome.attempts))
        if outcome.status == "success":
            run.results.setdefault(node_id, {})[outcome.key] = ran_entry(outcome.index,
                                                                         outcome.format)
            if self.graph.output_read(node_id):
                run.digests.setdefault(node_id, {})[outcome.key] = outcome.output_hash
            if outcome.key_columns is not None:
                self.source_columns.take(node_id, outcome.key_columns)
        else:
            run.failures.append(outcome)
            run.failed_keys.setdefault(node_id, []).append(outcome.key)
        run.pending[node_id] -= 1
        if run.pending[node_id]:
            return False
        del run.pending[node_id]
        self._node_finished(node_id)
        return True

    def _node_finished(self, node_id: str) -> None:
        self.run.complete.add(node_id)
        self.planning.learn_output(node_id)
        forced = self.graph.nodes[node_id].serializer
        if forced in TABLE_FORMATS and node_id in self.run.results:
            self._check_table_format(node_id, forced)

    def _check_table_format(self, node_id: str, forced: str) -> None:
        """A forced table format on a value that is not a table was stored as pickle: say so
        once for the node, with how many keys."""
        ran = self.run.results[node_id]
        other = [k for k, entry in ran.items() if unpack_entry(entry)[1] != forced]
        if not other:
            return
        plan = self.run.plans[node_id]
        which = f"{len(other)} of {len(ran)} keys ({plan.label(min(other))}, ...) " \
            if plan.partitioned else ""
        message = (f"{node_id}: serializer=\"{forced}\" needs a table (pandas, polars, Arrow or "
                   f"DuckDB), but {which}returned another value; stored as pickle instead")
        self._warn("serializer_fallback", node_id, None, message)

    def _check_bytes(self) -> None:
        """Recomputes at an unchanged run hash that wrote different bytes (engine.byte_checks)."""
        self.bytes_changed = changed_bytes(self.conn, self.graph, self.run)
        for node_id, keys in self.bytes_changed.items():
            plan = self.run.plans[node_id]
            which = ""
            if plan.partitioned:
                labels = [plan.label(k) for k in keys[:5]]
                more = f", +{len(keys) - 5} more" if len(keys) > 5 else ""
                which = f" (keys {', '.join(labels)}{more})"
            self._warn("bytes_changed", node_id, None,
                       f"{node_id} produced different bytes for the same code and inputs"
                       f"{which}; the function is not deterministic (declare "
                       "deterministic=False if that is expected)")

    def _warn(self, kind: str, node_id: str, param: str | None, message: str) -> None:
        self.warnings.append({"kind": kind, "node": node_id, "param": param,
                              "message": message})
        self.reporter.warning(message)

    def _flush(self) -> None:
        began = time.perf_counter()
        try:
            self._write_recorded()
        finally:
            self.metadata_seconds += time.perf_counter() - began

    def _write_recorded(self) -> None:
        if self.logs and not self.request.dry_run:
            metadata.insert_logs(self.conn, self.run_id, self.logs)
            self.logs = []
        if not self.unrecorded:
            return
        metadata.record(self.conn, self.run_id, self.unrecorded, self.run.plans,
                        self.leases.held(self.unrecorded), self.recorded_dir)
        self.unrecorded = []

    # -- end of run -------------------------------------------------------------------------

    def _finish(self, status: str, elapsed: float) -> None:
        if self.executor is not None:
            self.executor.close(cancel=status == "cancelled")
        if self.scratch is not None:
            self.scratch.destroy()
        if not self.recorded:
            return
        for step_id, text in self.log_cap.summaries():
            self.log_count += 1
            self.logs.append((self.log_count, step_id, "stderr", time.time(), text))
        self._flush()
        self._check_bytes()
        began = time.perf_counter()
        self.leases.release()  # what it did not finish, before its row says it ended
        run = self.run
        total_keys = sum(len(p.keys) for p in run.plans.values() if not p.unknown)
        failed = run.failures
        metadata.finish_run(self.conn, self.run_id, status, total_keys, run.executed,
                            self._cached_keys(), elapsed,
                            failed[0].step_id if failed else None,
                            failed[0].error_message if failed else None)
        defer_checkpoint(self.conn)
        self._save_states()
        self.source_columns.save(self.conn)
        self.metadata_seconds += time.perf_counter() - began
        notes = self.batches.notes()
        for text in notes:
            self.reporter.run_note(text)
        self.reporter.run_finished(run.executed, total_keys, elapsed, status)
        if notes:  # a batched run says where the coordinator's time went too
            notes.append(f"metadata {self.metadata_seconds:.1f}s recording this run's results")
            self.reporter.run_note(notes[-1])
        if notes:  # kept with the run's output: `barca logs` shows them too
            now = time.time()
            metadata.insert_logs(self.conn, self.run_id, [
                (i, "barca", "stderr", now, text)
                for i, text in enumerate(notes, start=self.log_count + 1)])

    def _save_states(self) -> None:
        """Write each node's new snapshot, so the next run compares whole columns again."""
        run = self.run
        updates = {}
        for node_id in run.order:
            plan = run.plans.get(node_id)
            if plan is None or plan.unknown:
                continue
            old = run.states.get(node_id, EMPTY_STATE)
            ran = run.results.get(node_id, {})
            failed = {o.key: [o.run_hash, o.error_message] for o in run.failures
                      if o.node_id == node_id}
            replayed = run.stored.get(node_id, metadata.NOT_STORED).replayed
            if not ran and not failed and node_id not in run.rewrite and not replayed and \
                    old.run_hash == plan.run_hashes and old.keys == plan.keys:
                continue
            updates[node_id] = state_after_run(
                plan, old, ran, run.digests.get(node_id, {}), failed,
                keep_output_hash=self.graph.output_read(node_id),
                whole=not self.request.options.partition)
        metadata.save_states(self.conn, updates, run.loaded, run.stored, self.run_id)

    def _cached_keys(self) -> int:
        """Keys served from cache (or by a concurrent run): not every key this run did not
        execute, since a failed or cancelled run leaves keys that never ran at all."""
        return sum(p.cached_count for p in self.run.plans.values() if not p.unknown)

    def _result(self, status: str, elapsed: float) -> RunResult:
        run = self.run
        depth: dict[str, int] = {}  # sensors observe before the phases: they count in none
        executed = {n for n in run.order if (n in run.results or n in run.failed_keys)
                    and self.graph.nodes[n].kind != "sensor"}
        for n in run.order:
            ran = n in run.results or n in executed and n not in run.skipped_keys
            base = max((depth.get(u, 0) for u in self.graph.upstream[n]), default=0)
            depth[n] = base + (1 if ran else 0)
        phases = len({depth[n] for n in executed})
        skipped = dict(run.skipped_keys)
        for node_id in run.order:
            plan = run.plans.get(node_id)
            if plan is not None and plan.unknown and run.failures:
                skipped[node_id] = []
        return RunResult(self.run_id, self.request.targets, self.request.options, status,
                         elapsed, self.graph, self.request.cone, run.order, run.plans,
                         run.states, run.results, run.failures, skipped, run.executed,
                         self._cached_keys(), phases,
                         self.project.artifacts_dir, self.project.root, run.served,
                         self.store, self.batches.execution, self.metadata_seconds,
                         self.batches.planned, self.warnings,
                         bytes_changed=self.bytes_changed, step_times=run.step_times)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise RunInterrupted
