"""One run's step scheduling as pure transitions on plain data (not the cron scheduler of
`barca serve`, which is server/scheduler.py).

A node is `unplanned` (no plan yet, or its keys wait on an output), `planned` (stale keys
known, its inputs not all done), `streaming` (planned, and some keys dispatched already
because the keys they read succeeded: engine.key_streams), ready (planned or streaming, every
input done: `ready`), `running` (its keys dispatched: each is with the executor, or `leased`,
held by another run that computes it, until it is done, failed or served), `done`, or
`cancelled`. A dispatched key whose input key failed is `blocked` and never runs; a failed
attempt is `retry`d after a backoff while attempts remain (`engine.worker.retries`, applied
where the step runs).

Each transition takes the immutable `Schedule` (named tuples, the cheapest frozen values: one
is built per finished key) and an event's data and returns the new schedule
and the actions the loop (engine.coordinator) carries out, in order: `Claim` keys (lease them
and hand them to the executor), `Skip` blocked keys, `Finish` a node (learn its output, plan
its readers). Keys are counted, not listed, while they run, so a finished key costs the same at
200,000 keys as at 10; the keys that failed are the loop's data, passed in where a decision
needs them. Nothing here does I/O or reads a clock: the time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection, Container, Mapping, NamedTuple, Sequence

POLL_SECONDS = 0.15  # how often the steps other runs hold are looked at


@dataclass(frozen=True)
class Edge:
    """An input of a node: `per_key` when a failed key of `source` blocks only the same key
    of the reader (both partitioned, read key for key), else every key."""

    source: str
    per_key: bool


class NodeSteps(NamedTuple):
    """phase        unplanned | planned | streaming | running | done | cancelled
    outstanding  keys dispatched and not yet finished or served
    leased       of those, keys another run holds (waited for, then served or claimed back)
    failed       keys that failed here
    blocked      keys that did not run because an input key failed"""

    phase: str = "unplanned"
    outstanding: int = 0
    leased: int = 0
    failed: int = 0
    blocked: int = 0


class Schedule(NamedTuple):
    """Where each node of one run's cone stands."""

    order: tuple[str, ...]  # topological
    inputs: Mapping[str, tuple[Edge, ...]]
    nodes: Mapping[str, NodeSteps]
    poll_at: float | None = None  # when the leased keys are looked at next
    cancelled: bool = False
    outstanding: int = 0  # keys outstanding over all nodes (asked after every event)

    def phase(self, node_id: str) -> str:
        return self.nodes[node_id].phase

    def done(self) -> Container[str]:
        """The done nodes, as a view (asked per ready node: no set built each time)."""
        return _Done(self.nodes)


class _Done:
    __slots__ = ("nodes",)

    def __init__(self, nodes: Mapping[str, NodeSteps]) -> None:
        self.nodes = nodes

    def __contains__(self, node_id: object) -> bool:
        node = self.nodes.get(node_id)  # type: ignore[call-overload]
        return node is not None and node.phase == "done"


@dataclass(frozen=True)
class Claim:
    """Lease these keys (positions in the node's plan) and hand this run's to the executor."""
    node_id: str
    positions: tuple[int, ...]


@dataclass(frozen=True)
class Skip:
    """These keys of the node do not run: an input key they read failed."""
    node_id: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Finish:
    """Every key of the node is cached, finished, failed or blocked."""
    node_id: str


@dataclass(frozen=True)
class Stop:
    """End the executor's work; `cancel`: kill what runs."""
    cancel: bool


Action = Claim | Skip | Finish | Stop


def new_schedule(order: Sequence[str], inputs: Mapping[str, tuple[Edge, ...]]) -> Schedule:
    return Schedule(tuple(order), dict(inputs), {n: NodeSteps() for n in order})


def _with(s: Schedule, changed: Mapping[str, NodeSteps]) -> Schedule:
    """The schedule with these nodes changed."""
    outstanding = s.outstanding + sum(n.outstanding - s.nodes[k].outstanding
                                      for k, n in changed.items())
    return Schedule(s.order, s.inputs, {**s.nodes, **changed}, s.poll_at, s.cancelled,
                    outstanding)


# -- planning -------------------------------------------------------------------------------

def planned(s: Schedule, stale: Mapping[str, int | None]) -> tuple[Schedule, list[Action]]:
    """Unplanned nodes got a plan: `stale` node id -> how many keys it must run (None: its keys
    are still unknown). One with nothing to run is done at once; its output is known already."""
    changed = {}
    for node_id, count in stale.items():
        if s.nodes[node_id].phase == "unplanned" and count is not None:
            changed[node_id] = s.nodes[node_id]._replace(phase="planned" if count else "done")
    return _with(s, changed), []


def reopened(s: Schedule, node_id: str) -> tuple[Schedule, list[Action]]:
    """A cached result the node holds is gone: it runs again, as a planned node (a streaming
    one runs it with the keys it has left)."""
    if s.nodes[node_id].phase in ("running", "streaming"):
        return s, []
    return _with(s, {node_id: s.nodes[node_id]._replace(phase="planned")}), []


def ready(s: Schedule) -> list[str]:
    """Planned or streaming nodes whose inputs are all done, in topological order."""
    return [n for n in s.order if is_ready(s, n)]


def is_ready(s: Schedule, node_id: str) -> bool:
    return s.nodes[node_id].phase in ("planned", "streaming") and \
        all(s.nodes[e.source].phase == "done" for e in s.inputs.get(node_id, ()))


# -- dispatch -------------------------------------------------------------------------------

def streamed(s: Schedule, node_id: str, positions: Sequence[int]
             ) -> tuple[Schedule, list[Action]]:
    """Keys of a node whose inputs still run are dispatched early: the keys they read
    succeeded. The node streams until its inputs are done and the rest is dispatched."""
    old = s.nodes[node_id]
    node = old._replace(phase="streaming", outstanding=old.outstanding + len(positions))
    return _with(s, {node_id: node}), [Claim(node_id, tuple(positions))]


def dispatch(s: Schedule, node_id: str, stale: Mapping[str, int], ran: Collection[str],
             bad: Mapping[str, Collection[str]]) -> tuple[Schedule, list[Action]]:
    """Dispatch a node's stale keys not dispatched yet (key -> position in its plan), less
    those it `ran` already in this run; `bad`: node id -> keys that failed or were blocked in
    this run. A key whose input key is bad is blocked (every key, unless the input blocks key
    for key). A streaming node is done once the keys it streamed are too."""
    blocked: set[str] | None = set()
    for edge in s.inputs.get(node_id, ()):
        up = s.nodes[edge.source]
        if not (up.failed or up.blocked):
            continue
        if not edge.per_key:
            blocked = None  # every key
            break
        blocked.update(bad.get(edge.source, ()))
    skipped = tuple(stale) if blocked is None else tuple(k for k in stale if k in blocked)
    run = () if blocked is None else \
        tuple(i for k, i in stale.items() if k not in blocked and k not in ran)
    actions: list[Action] = [Skip(node_id, skipped)] if skipped else []
    old = s.nodes[node_id]
    if not run and not old.outstanding:
        node = old._replace(phase="done", blocked=old.blocked + len(skipped))
        return _with(s, {node_id: node}), actions + [Finish(node_id)]
    node = old._replace(phase="running", outstanding=old.outstanding + len(run),
                        blocked=old.blocked + len(skipped))
    return _with(s, {node_id: node}), actions + ([Claim(node_id, run)] if run else [])


# -- what comes back ------------------------------------------------------------------------

def step_finished(s: Schedule, node_id: str, ok: bool) -> tuple[Schedule, list[Action]]:
    """One key the executor ran ended (after its last attempt)."""
    old = s.nodes[node_id]
    left = old.outstanding - 1
    done = left == 0 and old.phase == "running"
    nodes = s.nodes.copy()  # built directly: this runs once per key
    nodes[node_id] = NodeSteps("done" if done else old.phase, left, old.leased,
                               old.failed + (not ok), old.blocked)
    return Schedule(s.order, s.inputs, nodes, s.poll_at, s.cancelled, s.outstanding - 1), \
        [Finish(node_id)] if done else []


def leases_seen(s: Schedule, served: Mapping[str, int], waiting: Mapping[str, int], now: float,
                polled: bool = False) -> tuple[Schedule, list[Action]]:
    """What the leases said after a claim or a look (`polled`): `served` node id -> keys
    another run recorded at the wanted run hash (cached now), `waiting` node id -> how many
    of its keys are now held by other runs. Leased keys are looked at every POLL_SECONDS."""
    changed, more = {}, False
    for node_id in {**served, **waiting}:
        old = s.nodes[node_id]
        leased = waiting.get(node_id, old.leased)
        more |= leased > old.leased
        changed[node_id] = old._replace(outstanding=old.outstanding - served.get(node_id, 0),
                                   leased=leased)
    s, actions = _settle(s, changed)
    held = any(n.leased for n in s.nodes.values())
    poll_at = None if not held else now + POLL_SECONDS if more or polled or s.poll_at is None \
        else s.poll_at
    return s._replace(poll_at=poll_at), actions


def _settle(s: Schedule, changed: dict[str, NodeSteps]) -> tuple[Schedule, list[Action]]:
    """Nodes whose last outstanding key ended are done."""
    actions: list[Action] = []
    for node_id, node in changed.items():
        if node.outstanding == 0 and node.phase == "running":
            changed[node_id] = node._replace(phase="done")
            actions.append(Finish(node_id))
    return _with(s, changed), actions


def cancel(s: Schedule) -> tuple[Schedule, list[Action]]:
    """The run was interrupted: what did not end is cancelled, what runs is killed."""
    changed = {n: node._replace(phase="cancelled") for n, node in s.nodes.items()
               if node.phase != "done"}
    return _with(s, changed)._replace(cancelled=True, poll_at=None), [Stop(cancel=True)]


# -- questions ------------------------------------------------------------------------------

def only_leased(s: Schedule) -> bool:
    """Every outstanding key is held by another run: nothing of this run's is in flight."""
    return all(n.outstanding == n.leased for n in s.nodes.values())


def poll_in(s: Schedule, now: float) -> float | None:
    """Seconds until the leased keys are looked at; None while none is waited for."""
    return None if s.poll_at is None else max(0.0, s.poll_at - now)


def status(s: Schedule, dry_run: bool) -> str:
    """How the run ended, once its loop returned."""
    if s.cancelled:
        return "cancelled"
    if dry_run:
        return "dry_run"
    return "failed" if any(n.failed for n in s.nodes.values()) else "success"
