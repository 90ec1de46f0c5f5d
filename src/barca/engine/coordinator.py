"""The coordinator: the loop that connects the run's planning, its step scheduler, its recorder
and the executor.

Scheduling policy: sensors in the cone run first (they only observe). Then every node is
planned (engine.planning); a node is dispatched once each node it reads is complete (all its
keys cached or finished), all its stale keys at once, in key order, except that a partitioned
node reading running partitioned nodes key for key runs a key as soon as the keys it reads
have succeeded (engine.key_streams), its steps ahead of those queued. A node whose plan depends
on an output (a cutoff asset's bytes, a key source's list or dict) is planned again when that
output exists. Ties break by node id, so the same inputs give the same order. Which node is
ready, which keys run, are blocked, wait for another run or end the node is decided by
engine.step_scheduler on plain data; this loop carries out what it says: take what the
executor reports, record it, then advance (plan what became decidable, dispatch what became
ready) until nothing changes, and wait again. Finished steps are recorded (engine.run_recorder)
in batches at most twice a second and then dropped, so a killed run keeps all but the last
half second of its work and memory does not grow with the run.

Other runs on the same project are met through the metadata database (engine.concurrent_runs):
an asset step another run is computing is not submitted but waited for, while the rest of the
run goes on, and then served from that run's result.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable, Sequence

from barca.engine import step_scheduler
from barca.engine.batch_calls import BatchCalls
from barca.engine.concurrent_runs import Claim, Steps
from barca.engine.events import MetadataNote, Reporter
from barca.engine.executor import Executor, NewExecutor
from barca.engine.key_streams import KeyStreams
from barca.engine.planning import Planning
from barca.engine.protocol import CallFinished, LogLine, RunInterrupted, StepOutcome
from barca.engine.request import CheckedRequest
from barca.engine.result import RunResult, run_phases
from barca.engine.run_recorder import RunRecorder
from barca.engine.run_checks import (bytes_changed_warnings, check_manual_computed,
                                     declared_env, table_format_fallback)
from barca.engine.run_state import new_run_state
from barca.engine.step_scheduler import Action, Finish, Skip, Stop
from barca.engine.step_submission import StepSubmission
from barca.engine.still_running import StillRunning
from barca.errors import Cancelled, InfraError
from barca.graph import Graph
from barca.planner.planner import refreshed_nodes
from barca.project import Project
from barca.store.artifact_store import ArtifactStore, check_store, project_store

FLUSH_SECONDS = 0.5


def execute(project: Project, graph: Graph, request: CheckedRequest, reporter: Reporter,
            new_executor: NewExecutor, run_id: str | None = None,
            triggered_by: str = "cli", warnings: Sequence[dict] = (),
            schedule: tuple[str, float] | None = None,
            store: ArtifactStore | None = None) -> RunResult:
    """Run a checked request; `new_executor` is called when a step first must run.
    `warnings`: said already (the caller's), kept in the result with the run's own;
    `schedule`: (schedule id, tick time) of a run a schedule started, recorded with it;
    `store`: where results live (default: the project's, store.artifact_store.project_store)."""
    store = store or project_store(project, checked=False)  # checked by `go`
    run = _Run(project, graph, request, reporter, new_executor, run_id or os.urandom(6).hex(),
               store)
    run.warnings.extend(warnings)
    return run.go(triggered_by, schedule)


class _Run:
    """One run: its request, its `RunState`, the executor and the recorder."""

    def __init__(self, project: Project, graph: Graph, request: CheckedRequest, reporter: Reporter,
                 new_executor: NewExecutor, run_id: str, store: ArtifactStore) -> None:
        self.project, self.graph, self.request, self.store = project, graph, request, store
        self.reporter, self.new_executor, self.run_id = reporter, new_executor, run_id
        self.executor: Executor | None = None  # made on first need
        self.closing: list[Action] = [Stop(cancel=False)]  # what ends the run's work
        self.scratch: ArtifactStore | None = None  # a dry run's sensors write here
        self.batches = BatchCalls(graph, project.root, request.options.batch)
        self.streams = KeyStreams(graph, self.batches.settings)
        self.handling_seconds = 0.0  # handling finished keys (the recorder counts its writes)
        self.warnings: list[dict] = []  # {kind, node, param, evidence...}, each said on stderr
        self.bytes_changed: dict[str, list[str]] = {}  # node id -> keys with new bytes
        # BARCA_PROGRESS_SECS is checked before the run's row, and only where steps can run
        # (not `barca status`, which observes no sensor)
        self.still_running = StillRunning(reporter) if request.observe_sensors else None

    def go(self, triggered_by: str, schedule: tuple[str, float] | None) -> RunResult:
        started = time.perf_counter()
        req, graph = self.request, self.graph
        order = tuple(n for n in graph.order if n in req.cone)
        sensors = [n for n in order if graph.nodes[n].kind == "sensor"]
        if req.observe_sensors and sensors:  # a sensor always runs: start its worker first,
            self.executor = self.new_executor()  # so that its start and imports overlap all
            self.executor.prestart()  # that comes before its step (and stop it if that fails)
        try:
            if not req.dry_run:
                self.project.ensure_state_dir()
            self.run = run = new_run_state(graph, order, self.store)
            self.recorder = recorder = RunRecorder(self.project, self.run_id, graph, run,
                                                    req.dry_run, self._warn)
            if req.observe_sensors:  # a get or run, not an inspection predicting one
                check_manual_computed(graph, req, order, recorder.has_success)
            check_store(self.store)  # exit 3 before any step
        except BaseException:
            self._carry_out([Stop(cancel=True)])
            raise
        if req.dry_run:
            self.scratch = run.written = self.store.scratch()
        # sensors first: the rest of the state loads while they run
        early = graph.cone(sensors) if sensors else frozenset()
        run.took_states(recorder.load_states(n for n in order if n in early))
        run.refreshed = refreshed_nodes(graph, req.cone, req.options)
        self.planning = Planning(graph, req.options, req.expr_keys, run, recorder,
                                 self.reporter)
        self.submission = StepSubmission(graph, self.planning, self.batches, recorder,
                                         self.reporter, self.store.address,
                                         self.scratch.address if self.scratch else "")
        if declared := declared_env(graph, order, req.options.env):
            self.reporter.declared_env(declared)
        previous = {sig: signal.signal(sig, RunInterrupted.on_signal)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        status = "failed"
        try:  # from its first row on, a run ends recorded, interrupted or not
            recorder.start(req, triggered_by, schedule)
            # after the row: a server answers a run accepted once it is recorded (or queued)
            self.reporter.run_accepted()
            self._observe_sensors(sensors, [n for n in order if n not in early])
            self.planning.plan_pending()
            if req.dry_run:
                self.planning.predict_missing(req.targets)
                self.batches.plan_dry_run(run.plans)
            else:
                self._execute()
            status = step_scheduler.status(run.schedule, req.dry_run)
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt) or RunInterrupted.within(exc):
                run.schedule, self.closing = step_scheduler.cancel(run.schedule)
                status = step_scheduler.status(run.schedule, req.dry_run)
                raise Cancelled("run cancelled", "rerun the same command; finished steps are kept")
            if isinstance(exc, InfraError):  # the run cannot go on (its artifact store
                self.closing = [Stop(cancel=True)]  # failed, say): what runs is stopped now
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            try:
                self._finish(status, time.perf_counter() - started)
            finally:
                recorder.close()
        return self._result(status, time.perf_counter() - started)

    def _observe_sensors(self, sensors: list[str], later: list[str]) -> None:
        """Run the sensors; meanwhile load the state of the nodes they do not need (`later`),
        which at 200,000 keys takes as long as a sensor's query."""
        run = self.run
        if sensors:
            self.planning.plan(sensors)
            if self.request.observe_sensors:
                self.reporter.run_started(sum(len(run.plans[n].run) for n in sensors))
                self._dispatch(sensors)
        run.took_states(self.recorder.load_states(later))
        if not sensors:
            return
        if self.request.observe_sensors:
            self.recorder.checkpoint()  # the previous run's deferred one; the sensor is running
            self._drain(lambda: all(run.schedule.phase(n) == "done" for n in sensors),
                        advance=False)
            return
        self.planning.predict_sensors(sensors)

    # -- the loop ---------------------------------------------------------------------------

    def _execute(self) -> None:
        run = self.run
        self.planning.announce()
        self.planning.check_targets(self.request.targets)
        self.batches.check_groups(run.plans)
        self._advance()
        self._drain(lambda: not run.schedule.outstanding, advance=True)

    def _advance(self) -> None:
        """Dispatch every ready node and open the streams that can open, until nothing changes:
        a dispatch can end a node at once, a missing cached input plans its source again."""
        while True:
            ready, reopened = [], False
            for node_id in step_scheduler.ready(self.run.schedule):
                if not step_scheduler.is_ready(self.run.schedule, node_id):
                    continue  # an input of it was reopened just now
                if self.planning.inputs_present(node_id):
                    ready.append(node_id)
                else:
                    reopened = True
            dispatched = self._dispatch(ready)
            reopened |= self.streams.open(self.run, self.planning.inputs_present)
            if not (self._stream() or dispatched or reopened):
                return

    def _stream(self) -> bool:
        """Claim the keys streaming nodes can run now, queued first; True: advance the loop."""
        return self.streams.dispatch_due(
            self.run, lambda steps: self._take(self.recorder.leases.claim(steps), first=True),
            self.planning.inputs_present)

    def _dispatch(self, node_ids: Sequence[str]) -> bool:
        """Hand the nodes' runnable keys to the executor; True if a node had none (done now)."""
        run = self.run
        steps: Steps = []
        finished = False
        for node_id in node_ids:
            plan = run.plans[node_id]
            streamed = self.streams.stop(node_id)
            run.schedule, actions = step_scheduler.dispatch(
                run.schedule, node_id,
                {k: i for i in plan.run if (k := plan.keys[i]) not in streamed},
                run.results.get(node_id, {}), run.failed_keys)
            steps += [(node_id, plan, list(a.positions)) for a in actions
                      if isinstance(a, step_scheduler.Claim)]
            finished |= self._carry_out(actions)
        if steps:
            finished |= self._take(self.recorder.leases.claim(steps))
        return finished

    def _carry_out(self, actions: list[Action]) -> bool:
        """What the scheduler said, but a claim (dispatched in bulk); True if a node ended."""
        finished = False
        for action in actions:
            if isinstance(action, Skip):
                self.run.failed_keys.setdefault(action.node_id, []).extend(action.keys)
                self.run.skipped_keys.setdefault(action.node_id, []).extend(action.keys)
            elif isinstance(action, Finish):
                self._node_finished(action.node_id)
                finished = True
            elif isinstance(action, Stop) and self.executor is not None:
                self.executor.close(cancel=action.cancel)
                self.executor = None
        return finished

    def _take(self, claim: Claim, polled: bool = False, first: bool = False) -> bool:
        """Submit what this run computes (`first`: ahead of what is queued), serve what other
        runs computed meanwhile, wait for what they compute; True if that completed a node."""
        run = self.run
        for node_id, keys, owner in claim.waiting:
            self.reporter.steps_waiting(node_id, keys if run.plans[node_id].partitioned
                                        else 0, owner.run_id, owner.pid)
        served = {node_id: self.planning.apply_served(node_id, hits)
                  for node_id, hits in claim.served.items()}
        touched = {*served, *(n for n, _, _ in claim.waiting),
                   *(n for n, node in run.schedule.nodes.items() if node.leased)}
        leases = self.recorder.leases
        run.schedule, actions = step_scheduler.leases_seen(
            run.schedule, served, {n: leases.waiting_in(n) for n in touched}, time.monotonic(),
            polled)
        finished = self._carry_out(actions)
        self._submit(claim.submit, first)
        return finished

    def _submit(self, steps: Steps, first: bool = False) -> None:
        if not any(keys for _, _, keys in steps):
            return
        if self.executor is None:
            self.executor = self.new_executor()
        self.submission.submit(self.executor, steps, first)

    def _drain(self, finished: Callable[[], bool], advance: bool) -> None:
        """Take events until `finished()`; with `advance`, dispatch what they made ready."""
        run, recorder = self.run, self.recorder
        assert self.executor is not None or finished() or run.schedule.poll_at is not None
        last_flush = time.monotonic()
        total = run.schedule.outstanding
        done = 0
        while not finished() or self.batches.open:  # a call's end follows its last key
            completed = False
            for event in self._events():
                if isinstance(event, CallFinished):
                    self.batches.finished(event)
                    continue
                if isinstance(event, LogLine):
                    recorder.log(event.step_id, event.stream, event.text)
                    self.reporter.step_output(event.step_id, event.stream, event.text)
                    continue
                done += 1
                began = time.perf_counter()
                completed |= self._take_outcome(event)
                self.handling_seconds += time.perf_counter() - began
                self.reporter.step_finished(event, done, max(total, done))
                for message in event.sink_errors:
                    self.reporter.sink_failed(event.step_id, message)
                    recorder.sink_failed(event.step_id, message)
            if self.still_running is not None:
                self.still_running.check(self.executor)
            if step_scheduler.poll_in(run.schedule, time.monotonic()) == 0:
                completed |= self._take(recorder.leases.poll(), polled=True)
            if advance:
                completed |= self._stream()
            if completed and advance:
                self._advance()
            if time.monotonic() - last_flush >= FLUSH_SECONDS:
                recorder.flush()
                last_flush = time.monotonic()
        recorder.flush()

    def _events(self) -> list:
        """What the executor reports, waiting at most until the next flush or the next look at
        steps other runs hold; with nothing of its own in flight, the run just sleeps."""
        timeout = FLUSH_SECONDS
        poll_in = step_scheduler.poll_in(self.run.schedule, time.monotonic())
        if poll_in is not None:
            timeout = min(timeout, poll_in)
            if step_scheduler.only_leased(self.run.schedule):
                time.sleep(timeout)
                return []
        return self.executor.events(timeout)

    def _take_outcome(self, outcome: StepOutcome) -> bool:
        """Record one outcome; True when it was its node's last pending key."""
        run = self.run
        run.executed += 1
        self.recorder.outcome(outcome)
        node_id = outcome.node_id
        spent = run.step_times.get(node_id, (0.0, 0))
        run.step_times[node_id] = (spent[0] + outcome.elapsed_seconds,
                                   max(spent[1], outcome.attempts))
        ok = outcome.status == "success"
        if ok:
            run.succeeded(outcome)
            self.streams.succeeded(node_id, outcome.key)
            if self.graph.output_read(node_id):
                run.digests.setdefault(node_id, {})[outcome.key] = outcome.output_hash
            if outcome.key_columns is not None:
                self.recorder.sources.take(node_id, outcome.key_columns)
        else:
            run.failures.append(outcome)
            run.failed_keys.setdefault(node_id, []).append(outcome.key)
        run.schedule, actions = step_scheduler.step_finished(run.schedule, node_id, ok)
        return self._carry_out(actions)

    def _node_finished(self, node_id: str) -> None:
        self.planning.learn_output(node_id)
        self._warn(table_format_fallback(self.graph, self.run, node_id))

    def _warn(self, warning: dict[str, Any] | None) -> None:
        if warning is not None:
            self.warnings.append(warning)
            self.reporter.warning(warning["kind"], warning)

    # -- end of run -------------------------------------------------------------------------

    def _finish(self, status: str, elapsed: float) -> None:
        """Record the run's end while its workers exit (what runs is killed first if the run
        was cancelled or failed); then close the executor."""
        if self.executor is not None and self.closing == [Stop(cancel=False)]:
            self.executor.wind_down()
        else:
            self._carry_out(self.closing)
        try:
            self._record_end(status, elapsed)
        finally:
            self._carry_out(self.closing)
            if self.scratch is not None:
                self.scratch.destroy()

    def _record_end(self, status: str, elapsed: float) -> None:
        recorder = self.recorder
        if not recorder.started:
            return
        recorder.closing_logs()
        self.bytes_changed = recorder.changed_bytes()
        for warning in bytes_changed_warnings(self.run, self.bytes_changed):
            self._warn(warning)
        run = self.run
        total_keys = run.total_keys()
        recorder.finish(status, total_keys, run.cached_keys(), elapsed,
                        whole=not self.request.options.partition)
        notes = self.batches.notes()
        for note in notes:
            self.reporter.run_note(note)
        self.reporter.run_finished(run.executed, total_keys, elapsed, status)
        if notes:  # a batched run says where the coordinator's time went too
            notes.append(MetadataNote(self.handling_seconds + recorder.seconds))
            self.reporter.run_note(notes[-1])
        notes += self.planning.upgrade_notes()  # once: results of an earlier barca kept
        if notes:
            recorder.notes(notes)  # kept with the run's output: `barca logs` shows them too

    def _result(self, status: str, elapsed: float) -> RunResult:
        run = self.run
        return RunResult(self.run_id, self.request.targets, self.request.options, status,
                         elapsed, self.graph, self.request.cone, run.order, run.plans,
                         run.states, run.results, run.failures, run.skipped(), run.executed,
                         run.cached_keys(), run_phases(self.graph, run),
                         self.project.artifacts_dir, self.project.root, run.served,
                         self.store, self.batches.execution,
                         self.handling_seconds + self.recorder.seconds,
                         self.batches.planned, self.warnings,
                         bytes_changed=self.bytes_changed, step_times=run.step_times,
                         packed=run.packed, stored=run.stored)
