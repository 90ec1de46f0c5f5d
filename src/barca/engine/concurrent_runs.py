"""Several runs on one project: a step another run is computing is waited for and then served
from its result, so that each key of each run hash executes once, however many runs want it.

Only assets are leased: their result is cached by run hash, so computing one twice is wasted
work and repeated side effects. A task is never cached, so two commands that run it mean two
runs of it, as they would one after the other. A sensor observes the outside world when its
run asks, and each run observes for itself (what it sees decides what that run computes).

Before a batch of asset steps is submitted, the run claims them in one write transaction
(`claim`): a step another run recorded a success for since this run loaded the node is served
from that result; the rest are leased with one bulk insert; a step whose lease is held by a
run that no longer runs is taken over; one held by a live run is waited for. Waiting steps are
looked at when the step scheduler says (engine.step_scheduler.POLL_SECONDS; `poll`, which only
reads unless something can be claimed): a
success recorded for one serves it; when its owner failed it, or ended or died without
recording it, it is claimed again, and so computed here (or waited for again, if a third run
got it first). Another run's failure is not taken for this run's: it may have been passing,
and this run was asked for the value, as if the other run had failed just before it started.

Each look reads only the materializations recorded for the node since the last one (a range
of its index), so a run with nobody to meet pays one small transaction per batch.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple, Sequence

from barca.engine.run_state import RunState
from barca.graph import Graph
from barca.planner.model import NodePlan
from barca.store import step_leases as store
from barca.store.db import write_transaction
from barca.store.metadata import NOT_STORED
from barca.store.step_leases import Owner, Recorded

Steps = list[tuple[str, NodePlan, list[int]]]  # node id, its plan, positions of keys to run


class Claim(NamedTuple):
    submit: Steps  # for this run to compute
    served: dict[str, list[Recorded]]  # node id -> successes other runs recorded meanwhile
    waiting: list[tuple[str, int, Owner]]  # node id, keys newly waited for, the run holding them


class StepLeases:
    """The leases one run holds and the steps it waits for. `active` is False in a dry run,
    which takes no lease and waits for nothing."""

    def __init__(self, conn: sqlite3.Connection | None, run_id: str, graph: Graph,
                 run: RunState, active: bool) -> None:
        self.conn, self.run_id, self.graph, self.run = conn, run_id, graph, run
        self.active = active and conn is not None
        self.owner: Owner | None = None  # this process, read at the first lease
        self.checked: dict[str, int] = {}  # node id -> last materialization id looked at
        # node id -> owner -> key -> position, of the steps another run is computing
        self.waiting: dict[str, dict[Owner, dict[str, int]]] = {}
        self.leased: set[str] = set()  # nodes this run took leases on

    def claim(self, steps: Steps) -> Claim:
        """Which of these steps this run computes (in their order), which another run computed
        meanwhile, and which it waits for."""
        todo = {node_id: (plan, {plan.keys[i]: i for i in keys})
                for node_id, plan, keys in steps if self._leases(node_id)}
        if not todo:
            return Claim(steps, {}, [])
        mine, served, waiting = self._claim(todo)
        return Claim([(node_id, plan, mine[node_id] if node_id in todo else keys)
                      for node_id, plan, keys in steps], served, waiting)

    def poll(self) -> Claim:
        """What became of the steps other runs hold: served, or claimed by this run."""
        served: dict[str, list[Recorded]] = {}
        todo: dict[str, tuple[NodePlan, dict[str, int]]] = {}
        alive: dict[Owner, bool] = {}
        for node_id in list(self.waiting):
            plan, freed = self.run.plans[node_id], {}
            hits = self._catch_up(node_id, plan, freed)
            if hits:
                served[node_id] = hits
            owners = self.waiting.get(node_id, {})
            for owner in list(owners):
                if owner not in alive:
                    alive[owner] = store.alive(self.conn, owner)
                if not alive[owner]:
                    freed.update(owners.pop(owner))
            self._prune(node_id)
            if freed:
                todo[node_id] = (plan, freed)
        if not todo:
            return Claim([], served, [])
        mine, more, waiting = self._claim(todo)
        for node_id, hits in more.items():
            served.setdefault(node_id, []).extend(hits)
        return Claim([(node_id, todo[node_id][0], keys) for node_id, keys in mine.items()],
                     served, waiting)

    def waiting_in(self, node_id: str) -> int:
        """How many of the node's keys other runs hold, waited for."""
        return sum(len(keys) for keys in self.waiting.get(node_id, {}).values())

    def held(self, outcomes: Sequence) -> list[tuple[str, str, str]]:
        """The leased steps among these outcomes, given back when they are recorded."""
        return [(o.node_id, o.key, o.run_hash) for o in outcomes if o.node_id in self.leased]

    def release(self) -> None:
        """The end of the run: give back the leases of steps it did not finish."""
        if self.leased:
            with write_transaction(self.conn):
                store.release_run(self.conn, self.run_id, self.leased)

    # -- inside ---------------------------------------------------------------------------

    def _leases(self, node_id: str) -> bool:
        return self.active and self.graph.nodes[node_id].kind == "asset"

    def _claim(self, todo: dict[str, tuple[NodePlan, dict[str, int]]]
               ) -> tuple[dict[str, list[int]], dict[str, list[Recorded]],
                          list[tuple[str, int, Owner]]]:
        """In one transaction: serve what was recorded meanwhile, lease the rest, take over
        stale leases, wait for live ones. `todo`: node id -> (plan, key -> position).
        Returns the positions this run computes per node, the served and the newly waiting."""
        if self.owner is None:
            self.owner = store.this_process(self.run_id)
        mine: dict[str, list[int]] = {}
        served: dict[str, list[Recorded]] = {}
        waiting: list[tuple[str, int, Owner]] = []
        with write_transaction(self.conn):
            for node_id, (plan, claiming) in todo.items():
                hits = self._catch_up(node_id, plan, claiming)
                if hits:
                    served[node_id] = hits
                if claiming:
                    waiting += self._lease(node_id, plan, claiming)
                mine[node_id] = list(claiming.values())  # what is left is this run's
        return mine, served, waiting

    def _lease(self, node_id: str, plan: NodePlan, claiming: dict[str, int]
               ) -> list[tuple[str, int, Owner]]:
        """Lease the steps; those a live run holds move from `claiming` to the waiting ones."""
        hashes = plan.run_hashes
        self.leased.add(node_id)
        taken = store.take(self.conn, self.owner, node_id,
                           ((key, hashes[i]) for key, i in claiming.items()))
        if taken == len(claiming):
            return []
        held = [(key, owner) for key, run_hash, owner in store.holders(self.conn, node_id,
                                                                       self.run_id)
                if key in claiming and hashes[claiming[key]] == run_hash]
        alive = {owner: store.alive(self.conn, owner) for owner in {o for _, o in held}}
        for owner, ok in alive.items():
            if not ok:
                store.drop(self.conn, node_id, owner.run_id)
        store.take(self.conn, self.owner, node_id,
                   ((key, hashes[claiming[key]]) for key, owner in held if not alive[owner]))
        owners = self.waiting.setdefault(node_id, {})
        new: dict[Owner, int] = {}
        for key, owner in held:
            if alive[owner]:
                owners.setdefault(owner, {})[key] = claiming.pop(key)
                new[owner] = new.get(owner, 0) + 1
        self._prune(node_id)
        return [(node_id, count, owner) for owner, count in new.items()]

    def _catch_up(self, node_id: str, plan: NodePlan, claiming: dict[str, int]
                  ) -> list[Recorded]:
        """Outcomes other runs recorded for the node since the last look: a success at the
        run hash of a waited or `claiming` step serves it; a failure of a waited one moves it
        to `claiming`."""
        after = self.checked.get(node_id)
        if after is None:  # since this run loaded the node's state, which has the rest
            after = self.run.stored.get(node_id, NOT_STORED).watermark
        rows, self.checked[node_id] = store.recorded_since(self.conn, node_id, after,
                                                           self.run_id)
        if not rows:
            return []
        hashes = plan.run_hashes
        owners = self.waiting.get(node_id, {})
        served = []
        for row in rows:
            for keys in owners.values():
                i = keys.get(row.key)
                if i is not None and hashes[i] == row.run_hash:
                    del keys[row.key]
                    if row.success:
                        served.append(row)
                    else:
                        claiming[row.key] = i
                    break
            else:
                i = claiming.get(row.key)
                if row.success and i is not None and hashes[i] == row.run_hash:
                    del claiming[row.key]
                    served.append(row)
        self._prune(node_id)
        return served

    def _prune(self, node_id: str) -> None:
        owners = self.waiting.get(node_id)
        if owners is None:
            return
        for owner in [o for o, keys in owners.items() if not keys]:
            del owners[owner]
        if not owners:
            del self.waiting[node_id]
