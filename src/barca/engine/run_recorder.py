"""Every database write of one run, and the reads its planning needs, behind one object: the
run's row (start, finish), its finished steps and logs (buffered, written in batches),
the leases it holds on steps (engine.concurrent_runs), each node's new state and a key
source's stored columns. The coordinator's loop calls it and holds no connection.

A dry run opens the database without creating it and writes nothing; its reads still answer.
A recorded run is also traced when BARCA_TELEMETRY asks for it (barca.telemetry): the trace
sees what the database does (the run's start, each outcome, the end), and what goes wrong
with it is a warning (`warn`), never a failure.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Sequence

from barca.engine.byte_checks import changed_bytes
from barca.engine.concurrent_runs import StepLeases
from barca.engine.events import RunNote
from barca.engine.key_source_columns import SourceColumns
from barca.engine.log_cap import LogCap
from barca.engine.protocol import StepOutcome
from barca.engine.request import CheckedRequest
from barca.engine.run_state import RunState
from barca.errors import InfraError
from barca.graph import Graph
from barca.project import Project
from barca.state import EMPTY_STATE, NodeState, state_after_run
from barca.store import metadata
from barca.store.db import checkpoint, connect, defer_checkpoint, release
from barca.telemetry import NO_TRACE, run_trace
# the words of what the run keeps in its logs about itself (the engine writes no English)
from barca.views.warning_text import log_mark_text, note_text, sink_failed_text


class RunRecorder:
    def __init__(self, project: Project, run_id: str, graph: Graph, run: RunState,
                 dry_run: bool, warn: Callable[[dict], None] = lambda warning: None) -> None:
        self.run_id, self.graph, self.run, self.dry_run = run_id, graph, run, dry_run
        self.warn = warn
        self.trace: Any = NO_TRACE  # barca.telemetry's, once a run that executes has started
        self.conn = connect(project.db_path, create=not dry_run)
        self.started = False  # its row is written: it ends recorded
        self.unrecorded: list[StepOutcome] = []
        self.logs: list[tuple] = []  # (place in the run, step id, stream, time, text)
        self.log_count = 0
        self.log_cap = LogCap()  # what of the steps' output is stored
        # how the metadata records a result's store key: as its path in the project's local
        # layout (`artifact_path` in JSON), whichever store holds it
        self.recorded_dir = project.artifacts_dir.relative_to(project.root).as_posix()
        self.leases = StepLeases(self.conn, run_id, graph, run, active=not dry_run)
        self.sources = SourceColumns()  # key sources' stored columns
        self.seconds = 0.0  # spent writing

    # -- reads ------------------------------------------------------------------------------

    def load_states(self, node_ids: Iterable[str]) -> tuple[dict, dict]:
        return metadata.load_states(self.conn, list(node_ids))

    def has_success(self, node_id: str) -> bool:
        return metadata.has_success(self.conn, node_id)

    def find_successes(self, node_id: str, wanted: Any) -> list:
        return metadata.find_successes(self.conn, node_id, wanted)

    def output_hashes(self, node_id: str, wanted: Any) -> dict[str, str]:
        return metadata.output_hashes(self.conn, node_id, wanted)

    def read_sources(self, node_ids: Sequence[str]) -> None:
        """The stored chunk digests of key sources about to run (their steps compare)."""
        self.sources.read_digests(self.conn, node_ids)

    def load_sources(self, node_ids: Sequence[str]) -> None:
        self.sources.load(self.conn, node_ids)

    def changed_bytes(self) -> dict[str, list[str]]:
        """engine.byte_checks, over what this run recorded."""
        return changed_bytes(self.conn, self.graph, self.run)

    # -- writes -----------------------------------------------------------------------------

    def start(self, request: CheckedRequest, triggered_by: str,
              schedule: tuple[str, float] | None) -> None:
        """The run's row (refused, exit 2, nothing written, if the id is taken); from here
        on the run ends recorded. Nothing in a dry run."""
        if self.dry_run:
            return
        metadata.start_run(self.conn, self.run_id, request.command, request.files,
                           request.target_text, triggered_by,
                           ",".join(sorted(request.targets)) or "all", schedule)
        self.started = True
        if request.observe_sensors:  # a get or run, not an inspection
            self.trace, warnings = run_trace(self.run_id, request.command,
                                             ",".join(sorted(request.targets)) or "all",
                                             request.files, triggered_by)
            for warning in warnings:
                self.warn(warning)

    def checkpoint(self) -> None:
        """The previous run's deferred checkpoint, while a sensor runs."""
        if not self.dry_run:
            checkpoint(self.conn)

    def outcome(self, outcome: StepOutcome) -> None:
        if not self.dry_run:
            self.unrecorded.append(outcome)
            self.trace.outcome(outcome, self.run.plans[outcome.node_id])

    def log(self, step_id: str, stream: str, text: str) -> None:
        kept = self.log_cap.admit(step_id, text)
        if kept is not None:
            self._line(step_id, stream, kept if isinstance(kept, str) else log_mark_text(kept))

    def _line(self, step_id: str, stream: str, text: str) -> None:
        self.log_count += 1  # the line's place in the run, across flushes
        self.logs.append((self.log_count, step_id, stream, time.time(), text))

    def sink_failed(self, step_id: str, message: str) -> None:
        """Kept with the step's output."""
        self._line(step_id, "stderr", sink_failed_text(message))

    def flush(self) -> None:
        """What was buffered, in one transaction each (logs, steps)."""
        began = time.perf_counter()
        try:
            if self.logs and not self.dry_run:
                metadata.insert_logs(self.conn, self.run_id, self.logs)
                self.logs = []
            if self.unrecorded:
                # indexed before recorded: a kill in between leaves an index entry of results
                # that are in the store (harmless), never a record other machines cannot find
                try:
                    self.run.store.share([  # other machines find these by run hash
                        (o.key, o.run_hash, o.format, o.output_hash, o.artifact_key)
                        for o in self.unrecorded if o.status == "success" and o.artifact_key
                        and self.graph.nodes[o.node_id].kind == "asset"])
                except InfraError:  # not indexed, so not recorded: the run fails (exit 3)
                    self.unrecorded = []  # and its row still ends; a rerun computes them
                    raise
                metadata.record(self.conn, self.run_id, self.unrecorded, self.run.plans,
                                self.leases.held(self.unrecorded), self.recorded_dir)
                self.unrecorded = []
        finally:
            self.seconds += time.perf_counter() - began

    def closing_logs(self) -> None:
        """The counts of lines each step printed beyond what is stored, then a flush."""
        for step_id, dropped in self.log_cap.summaries():
            self._line(step_id, "stderr", log_mark_text(dropped))
        self.flush()

    def finish(self, status: str, total_keys: int, cached_keys: int, elapsed: float,
               whole: bool) -> None:
        """Give back the leases of steps it did not finish, then its row says it ended; each
        node's new state, a key source's new columns. `whole`: not narrowed by --partition."""
        began = time.perf_counter()
        self.leases.release()
        run, failed = self.run, self.run.failures
        metadata.finish_run(self.conn, self.run_id, status, total_keys, run.executed,
                            cached_keys, elapsed,
                            failed[0].step_id if failed else None,
                            failed[0].error_message if failed else None)
        defer_checkpoint(self.conn)
        metadata.save_states(self.conn, self._new_states(whole), run.loaded, run.stored,
                             self.run_id)
        self.sources.save(self.conn)
        self.seconds += time.perf_counter() - began
        kinds = {n: self.graph.nodes[n].kind for n in run.order}
        for warning in self.trace.finish(status, run, kinds):
            self.warn(warning)

    def close(self) -> None:
        """Let go of the database once the run is recorded: an in-process caller (the Python
        API, a test) leaves no connection, and no WAL file, behind (a dry run before any
        run has none). A command the warm pool forked leaves it to its exit (db.release)."""
        if self.conn is not None:
            release(self.conn)

    def notes(self, notes: Sequence[RunNote]) -> None:
        """Notes about the run as a whole, kept with its output (`barca logs`) in the words
        its events give them: the renderer's, as the engine writes no English."""
        now = time.time()
        metadata.insert_logs(self.conn, self.run_id, [
            (i, "barca", "stderr", now, note_text(note))
            for i, note in enumerate(notes, start=self.log_count + 1)])

    def _new_states(self, whole: bool) -> dict[str, NodeState]:
        """Each node's new snapshot, so the next run compares whole columns again."""
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
                keep_output_hash=self.graph.output_read(node_id), whole=whole,
                packed=run.packed.get(node_id))
        return updates
