"""A run's decisions, with the facts they need gathered for them.

The rules live in planner/ and are pure (planner.planner, planner.history,
planner.missing, planner.upgrade); this module only fetches what they take as data and
applies what they return to the run's state: older
successes a new run hash matches and output digests a snapshot lacks (asked of the run's
recorder, engine.run_recorder), a key source's keys and values (its stored chunks, or its
result), and whether the cached results that will be read are still in the artifact store (one
listing per node, never a request per key). A node planned, or to compute again, is told to
the step scheduler (engine.step_scheduler). The coordinator asks it to plan and never decides
itself.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from barca.engine.events import Reporter, UpgradeNote
from barca.engine.key_source_columns import SourceColumns, stored_columns
from barca.engine.result import locate_key, stored_key
from barca.engine import step_scheduler
from barca.engine.run_recorder import RunRecorder
from barca.engine.run_state import RunState
from barca.errors import InfraError
from barca.graph import Graph
from barca.packed_columns import HashColumn
from barca.planner.history import apply_history, history_wanted
from barca.planner.missing import input_keys_to_check, reopen, target_keys_to_check
from barca.planner.model import KnownOutput, NodePlan, PlanOptions
from barca.planner.outputs import UNKNOWN_DIGEST, output_digests, with_found
from barca.planner.planner import plan_nodes
from barca.planner.upgrade import upgraded
from barca.state import EMPTY_STATE
from barca.store.packs import file_of, where_in_pack
from barca.store.paths import node_dir_name
from barca.store.step_leases import Recorded

class Planning:
    def __init__(self, graph: Graph, options: PlanOptions,
                 expr_keys: Mapping[tuple[str, str], Sequence[str]], run: RunState,
                 records: RunRecorder, reporter: Reporter) -> None:
        self.graph, self.options, self.expr_keys, self.run = graph, options, expr_keys, run
        self.records, self.reporter = records, reporter
        self.source_columns: SourceColumns = records.sources

    # -- plans ------------------------------------------------------------------------------

    def plan(self, node_ids: Sequence[str]) -> None:
        """Plan these nodes (topological order) on what is known now. Keys a plan found
        recorded under hash scheme 1 for the current code are moved to its context in the
        run's state, whose snapshot is then written: the upgrade is stored once."""
        run = self.run
        run.plans = plan_nodes(self.graph, node_ids, run.states, run.known, self.options,
                               self.expr_keys, run.refreshed, run.plans)
        for node_id in node_ids:
            plan = run.plans[node_id]
            state = run.states.get(node_id)
            if plan.upgraded_from is not None and state is not None:
                if plan.kind == "asset":  # sensors and tasks run anyway: not "kept"
                    run.upgraded[node_id] = sum(1 for i in range(len(state))
                                                if state.context_at(i) == plan.upgraded_from)
                run.states[node_id] = upgraded(state, plan.upgraded_from, plan.context,
                                               plan.context_parts)
                run.rewrite.add(node_id)

    def plan_pending(self) -> None:
        """Plan every undecided node; repeat while a cached node reveals an output readers
        need. Nodes left with nothing to run are complete."""
        run = self.run
        while True:
            todo = [n for n in run.order if run.schedule.phase(n) == "unplanned"]
            self.plan(todo)
            self._apply_history_hits(todo)
            if not self._learn_cached_outputs(todo):
                break
        run.schedule, _ = step_scheduler.planned(run.schedule, {
            n: None if run.plans[n].unknown else len(run.plans[n].run) for n in todo})

    def announce(self) -> None:
        """Say how many steps the run has left to run, and what each node has cached."""
        run = self.run
        self.reporter.run_started(sum(len(p.run) for n, p in run.plans.items()
                                      if run.schedule.phase(n) != "done" and not p.unknown))
        for node_id in run.order:
            plan = run.plans[node_id]
            if not plan.unknown and plan.cached_count:
                self.reporter.step_cached(node_id, plan.cached_count if plan.partitioned else 0)

    def predict_sensors(self, sensors: Sequence[str]) -> None:
        """Sensors not observed (`barca status`, a dry run's prediction): each one's output is
        its last recorded one, where every key has one."""
        run = self.run
        for node_id in sensors:
            state = run.states.get(node_id)
            if state is not None and all(state.find(k) is not None
                                         for k in run.plans[node_id].keys):
                run.known[node_id] = self.known_output(node_id, {})
        run.schedule, _ = step_scheduler.planned(run.schedule, dict.fromkeys(sensors, 0))

    def upgrade_notes(self) -> list[UpgradeNote]:
        """The note that keys recorded under hash scheme 1 were kept, told to the reporter;
        none when no asset had any (so, after the run that stored them, never again)."""
        upgraded = self.run.upgraded
        if not upgraded:
            return []
        note = UpgradeNote(len(upgraded), sum(upgraded.values()))
        self.reporter.run_note(note)
        return [note]

    def _apply_history_hits(self, node_ids: Sequence[str]) -> None:
        """Keys that would run but succeeded before at the same run hash: found in this
        project's history, else among the results other machines shared (a shared store's
        index, or a server's ledger), asked once for every node of this planning phase."""
        run = self.run
        hits: dict[str, list] = {}
        unfound: dict[str, tuple[str, list[tuple[str, str]]]] = {}
        for node_id in node_ids:
            wanted = history_wanted(run.plans[node_id])
            if not wanted:
                continue
            found = []  # a node that never succeeded here has no older result here
            if node_id in run.states or self.records.has_success(node_id):
                found = self.records.find_successes(node_id, wanted)
            hits[node_id] = found
            if len(found) < len(wanted):
                keys = {record[0] for record in found}
                d = self.graph.nodes[node_id]
                unfound[node_id] = (node_dir_name(d.file, d.name),
                                    [w for w in wanted if w[0] not in keys])
        shared = run.store.shared_results(unfound) if unfound else {}
        for node_id, found in hits.items():
            found = found + self._shared_records(node_id, shared.get(node_id, {}))
            if found:
                run.plans[node_id], run.states[node_id] = apply_history(
                    run.plans[node_id], run.states.get(node_id, EMPTY_STATE), found)
                run.rewrite.add(node_id)

    def _shared_records(self, node_id: str, shared: Mapping[tuple[str, str], tuple]
                        ) -> list[tuple]:
        """Results another machine recorded at the wanted run hashes, as records of older
        successes (with this plan's hash parts: the run hash is the same)."""
        if not shared:
            return []
        plan = self.run.plans[node_id]
        position = {key: i for i, key in enumerate(plan.keys)}
        return [(key, run_hash, plan.context,
                 [column[position[key]] for column in plan.signatures], fmt, digest,
                 where_in_pack(store_key))
                for (key, run_hash), (fmt, digest, store_key) in shared.items()]

    def apply_served(self, node_id: str, hits: Sequence[Recorded]) -> int:
        """Keys other runs computed at the run hashes this run wanted: cached from now on,
        like older results found again, counted per run and reported; how many."""
        run = self.run
        run.plans[node_id], run.states[node_id] = apply_history(
            run.plans[node_id], run.states.get(node_id, EMPTY_STATE),
            [hit.record for hit in hits])
        run.rewrite.add(node_id)
        by_run = run.served.setdefault(node_id, {})
        for hit in hits:
            by_run[hit.run_id] = by_run.get(hit.run_id, 0) + 1
        self.reporter.step_cached(node_id, len(hits) if run.plans[node_id].partitioned else 0)
        return len(hits)

    # -- outputs readers depend on ----------------------------------------------------------

    def _learn_cached_outputs(self, planned: Sequence[str]) -> bool:
        """Outputs of fully cached nodes that some reader depends on; True when any is new.
        A cached key source whose file is gone is planned again instead: its readers' keys
        stay unknown until it has run (a dry run says so)."""
        learned = False
        for node_id in planned:
            plan = self.run.plans[node_id]
            if plan.unknown or plan.run or node_id in self.run.known or \
                    not self.graph.output_read(node_id):
                continue
            if self.graph.is_key_source(node_id) and \
                    node_id not in self.source_columns.current and \
                    self._reopen_missing(node_id, [""]):
                continue
            self.run.known[node_id] = self.known_output(node_id, {})
            learned = True
        return learned

    def learn_output(self, node_id: str) -> None:
        """A node finished: what its readers need of its output; readers planned again."""
        run = self.run
        failed = run.failed_keys.get(node_id, ())
        if not self.graph.output_read(node_id) or failed and (
                self.graph.is_key_source(node_id) or not run.plans[node_id].partitioned):
            return  # no output to read: every reader is blocked
        ran = run.digests.get(node_id, {})
        if failed:  # a failed key's stored bytes are not its result: its readers are blocked
            ran = {**ran, **dict.fromkeys(failed, UNKNOWN_DIGEST)}
        run.known[node_id] = self.known_output(node_id, ran)
        if self.graph.nodes[node_id].kind != "sensor":
            self.plan_pending()

    def known_output(self, node_id: str, ran: Mapping[str, str]) -> KnownOutput:
        """Output digests per key, plus the keys (and values) a key source defines."""
        hashes = self._output_hashes(node_id, self.run.plans[node_id], ran)
        if not self.graph.is_key_source(node_id):
            return KnownOutput(hashes)
        keys, values, order = self.source_columns.columns(node_id, lambda: self._columns(node_id))
        return KnownOutput(hashes, keys, values, order)

    def _output_hashes(self, node_id: str, plan: NodePlan, ran: Mapping[str, str]) -> HashColumn:
        """The digest of each key's bytes (plan.outputs), with those the state lacks looked up
        once in the database."""
        digests, lookup = output_digests(plan, self.run.states.get(node_id, EMPTY_STATE),
                                         self.run.results.get(node_id, {}), ran)
        if not lookup:
            return digests
        self.run.rewrite.add(node_id)
        return with_found(plan, digests, self.records.output_hashes(node_id, lookup))

    # -- cached files that are gone ---------------------------------------------------------

    def check_targets(self, targets: Sequence[str]) -> None:
        """A cached target whose file is gone is computed again: its value is what the user
        asked for."""
        for node_id in targets:
            self._reopen_missing(node_id, target_keys_to_check(self.run.plans[node_id]))

    def inputs_present(self, node_id: str) -> bool:
        """Whether the cached files this node's stale keys read are all there; the sources of
        missing ones are planned to compute them again."""
        run = self.run
        wanted = input_keys_to_check(self.graph, run.plans, node_id, run.failed_keys,
                                     run.results, run.schedule.done())
        reopened = [self._reopen_missing(source, keys) for source, keys in wanted.items()]
        return not any(reopened)

    def predict_missing(self, targets: Sequence[str]) -> None:
        """A dry run: what a real run would compute again because a cached file it reads is
        gone (a source planned again may itself read a missing file, so repeat)."""
        self.check_targets(targets)
        for _ in range(len(self.run.order) + 1):
            changed = False
            for node_id in reversed(self.run.order):
                plan = self.run.plans.get(node_id)
                if plan is not None and not plan.unknown and plan.run:
                    changed |= not self.inputs_present(node_id)
            if not changed:
                return

    def _reopen_missing(self, node_id: str, keys: Sequence[str]) -> bool:
        missing = self._missing(node_id, keys)
        if not missing:
            return False
        for key in missing:
            self.reporter.warning("missing_result", {
                "node": node_id, "param": None, "key": key,
                "location": self.run.store.location(self.artifact(node_id, key)[0])})
        run = self.run
        run.plans[node_id] = reopen(run.plans[node_id], missing)
        run.schedule, _ = step_scheduler.reopened(run.schedule, node_id)
        return True

    def _missing(self, node_id: str, keys: Sequence[str]) -> list[str]:
        """The keys whose cached result is not in the store: the node's results listed once
        (a request per key would be 200,000 requests to an object store at 200,000 keys)."""
        ran = self.run.results.get(node_id, {})
        cached = [k for k in keys if k not in ran]  # this run's own results are there
        if not cached:
            return []
        d = self.graph.nodes[node_id]
        present = self.run.store.names(node_dir_name(d.file, d.name))
        return [k for k in cached  # a packed key is there when its pack is (store.packs)
                if file_of(self.artifact(node_id, k)[0]).rpartition("/")[2] not in present]

    # -- where results are ------------------------------------------------------------------

    def last_observation(self, node_id: str, key: str) -> tuple[str, str, str | None] | None:
        """A sensor key's last recorded value: its store key, format and output digest; None
        before its first observation."""
        state = self.run.states.get(node_id, EMPTY_STATE)
        if len(state) > 16:
            state.keys.indexed()  # once: a partitioned sensor asks for every key
        j = state.find(key)
        if j is None:
            return None
        found = stored_key(self.graph.nodes[node_id], state, key)
        if found is None:
            return None
        return found[0], found[1], state.output_hash_at(j)

    def artifact(self, node_id: str, key: str) -> tuple[str, str]:
        """The store key of a key's current result, with its format."""
        run = self.run
        found = locate_key(self.graph.nodes[node_id], key, run.plans[node_id],
                           run.results.get(node_id, {}), run.states.get(node_id, EMPTY_STATE),
                           run.packed.get(node_id))
        if found is None:
            raise InfraError(f"no recorded result for {node_id} {key}".strip())
        return found

    def _columns(self, node_id: str) -> tuple[list[str], list[Any] | None, list[int] | None]:
        """A key source's keys, values and order, as its current result holds them."""
        run = self.run
        store = run.written if "" in run.results.get(node_id, {}) else run.store
        return stored_columns(store, *self.artifact(node_id, ""))
