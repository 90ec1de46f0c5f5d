"""Readers that start before their inputs end: a partitioned node that reads running
partitioned nodes key for key runs each of its stale keys as soon as every key it reads has
succeeded in this run, instead of waiting for the whole of each input. On a first run of
10,000 keys the reader's steps then share the workers with its inputs' steps, and the run
does not end on a tail of the reader's keys alone.

Only the plain case streams, and only keys whose input keys succeeded here: a key whose
input key failed, was blocked, was served by another run or was cached waits for its inputs
to end, and is then dispatched (or blocked) by the step scheduler as before. Batched nodes
(`batch=`), key sources and readers of a whole node, of every key (`collect`) or of an order
only never stream. Which node may stream, and when each key is due, is decided here on the
run's data; the step scheduler says how each dispatch changes the schedule, and the
coordinator's claim and submission hand the keys out.
"""

from __future__ import annotations

from typing import Callable, Collection, Container

from barca.engine import step_scheduler
from barca.engine.concurrent_runs import Steps
from barca.engine.run_state import RunState
from barca.graph import Graph
from barca.planner.missing import reads_inline

STREAMING_FROM = ("running", "streaming")  # phases of an input a reader can stream from


class KeyStreams:
    """The run's streaming readers: for each, its keys still waiting on input keys and those
    it dispatched early."""

    def __init__(self, graph: Graph, batched: Container[str]) -> None:
        self.graph, self.batched = graph, batched
        self.waiting: dict[str, dict[str, int]] = {}  # reader -> key -> input keys running
        self.readers: dict[str, list[str]] = {}  # input -> readers streaming from it
        self.positions: dict[str, dict[str, int]] = {}  # reader -> key -> position in plan
        self.released: dict[str, set[str]] = {}  # reader -> keys dispatched early
        self.due: dict[str, list[tuple[str, int]]] = {}  # reader -> (key, position) due now

    # -- which readers stream -------------------------------------------------------------

    def sources(self, run: RunState, node_id: str) -> tuple[str, ...]:
        """The running inputs a planned node can stream from; none when it cannot."""
        graph, plan = self.graph, run.plans.get(node_id)
        d = graph.nodes[node_id]
        if plan is None or plan.unknown or not plan.run or not d.dimensions or \
                d.kind == "sensor" or node_id in self.batched or node_id in self.waiting:
            return ()
        running = []
        for up in graph.upstream[node_id]:
            phase = run.schedule.phase(up)
            if run.failed_keys.get(up):
                return ()  # which keys that blocks is the step scheduler's to say, at the end
            if phase == "done":
                continue
            specs = [s for s in d.inputs if s.source == up]
            if phase not in STREAMING_FROM or up in self.batched or \
                    not graph.nodes[up].dimensions or not specs or \
                    any(s.mode != "value" or reads_inline(graph, plan, node_id, up)
                        for s in specs):
                return ()
            running.append(up)
        return tuple(running)

    def start(self, run: RunState, node_id: str, sources: tuple[str, ...]) -> None:
        """Stream `node_id` from `sources`: its stale keys not yet run or dispatched wait
        for their keys of each source; those whose every source key succeeded already are
        due now."""
        plan = run.plans[node_id]
        released = self.released.setdefault(node_id, set())
        ran = run.results.get(node_id, {})
        ended = [(run.results.get(up, {}), set(run.failed_keys.get(up, ())),
                  {run.plans[up].keys[i] for i in run.plans[up].run}) for up in sources]
        waiting, due, positions = {}, [], {}
        for i in plan.run:
            key = plan.keys[i]
            if key in ran or key in released:
                continue
            running = 0
            for succeeded, failed, will_run in ended:
                if key in succeeded:
                    continue
                if key in failed or key not in will_run:
                    running = -1  # cached, failed or blocked there: waits for the end
                    break
                running += 1
            if running == 0:
                due.append((key, i))
                released.add(key)
            elif running > 0:
                waiting[key] = running
                positions[key] = i
        self.waiting[node_id], self.positions[node_id] = waiting, positions
        if due:
            self.due.setdefault(node_id, []).extend(due)
        for up in sources:
            self.readers.setdefault(up, []).append(node_id)

    def open(self, run: RunState, inputs_present: Callable[[str], bool]) -> bool:
        """Start streaming the planned nodes that can, once the cached files they read are
        known to be there (`inputs_present`, which plans the source of a missing one again);
        True if one was not."""
        reopened = False
        for node_id in run.order:
            if run.schedule.phase(node_id) == "planned":
                sources = self.sources(run, node_id)
                if not sources:
                    continue
                if inputs_present(node_id):
                    self.start(run, node_id, sources)
                else:
                    reopened = True
        return reopened

    def dispatch_due(self, run: RunState, take: Callable[[Steps], bool],
                     inputs_present: Callable[[str], bool]) -> bool:
        """Hand the keys due to `take` (the loop's claim and submission, which says whether
        it completed a node), as the step scheduler's `streamed` says; the readers of a node
        that began streaming may stream in turn. True if the loop must advance."""
        advance = False
        while self.due:
            due, self.due = self.due, {}
            steps: Steps = []
            began = False
            for node_id, keys in due.items():
                began |= run.schedule.phase(node_id) == "planned"
                run.schedule, actions = step_scheduler.streamed(run.schedule, node_id,
                                                                [i for _, i in keys])
                steps += [(node_id, run.plans[node_id], list(a.positions))
                          for a in actions if isinstance(a, step_scheduler.Claim)]
            advance |= take(steps)
            if began:
                advance |= self.open(run, inputs_present)
        return advance

    # -- as keys end ------------------------------------------------------------------------

    def succeeded(self, node_id: str, key: str) -> None:
        """A key of `node_id` succeeded: the readers' keys that waited only on it are due."""
        for reader in self.readers.get(node_id, ()):
            waiting = self.waiting[reader]
            left = waiting.get(key)
            if left is None:
                continue
            if left > 1:
                waiting[key] = left - 1
                continue
            del waiting[key]
            self.released[reader].add(key)
            self.due.setdefault(reader, []).append((key, self.positions[reader].pop(key)))

    def stop(self, node_id: str) -> Collection[str]:
        """Every input of `node_id` ended: it streams no more. The keys it dispatched early,
        which its dispatch leaves out."""
        self.waiting.pop(node_id, None)
        self.positions.pop(node_id, None)
        for readers in self.readers.values():
            if node_id in readers:
                readers.remove(node_id)
        released = self.released.get(node_id, set())
        # due but not handed out yet: its dispatch runs them
        released.difference_update(key for key, _ in self.due.pop(node_id, ()))
        return released
