"""The step scheduler's transitions on literal states, as a table: (state, event) -> (new state,
actions). No project, no database, no executor, no clock: the state is plain data and the time
is a number.

The graph: `a` (partitioned) is read key for key by `b` and whole by `c`; `d` reads `b`
key for key; `b` and `c` are what most cases dispatch.
"""

from __future__ import annotations

import pytest

from barca.engine import step_scheduler as sch
from barca.engine.worker.retries import attempt_failed
from barca.engine.step_scheduler import Claim, Edge, Finish, NodeSteps, Schedule, Skip, Stop

ORDER = ("a", "b", "c", "d")
INPUTS = {"b": (Edge("a", per_key=True),), "c": (Edge("a", per_key=False),),
          "d": (Edge("b", per_key=True),)}


def state(poll_at: float | None = None, cancelled: bool = False, **nodes: NodeSteps) -> Schedule:
    """The schedule with the nodes given (the others unplanned)."""
    return Schedule(ORDER, INPUTS, {n: nodes.get(n, NodeSteps()) for n in ORDER}, poll_at,
                    cancelled, sum(node.outstanding for node in nodes.values()))


DONE = NodeSteps("done")
PLANNED = NodeSteps("planned")
K3 = {"k1": 0, "k2": 1, "k3": 2}  # stale keys -> their positions in the plan

CASES = [
    # -- planning --------------------------------------------------------------------------
    ("planned with stale keys",
     state(), lambda s: sch.planned(s, {"a": 3}),
     state(a=PLANNED), []),
    ("planned with every key cached: done at once",
     state(), lambda s: sch.planned(s, {"a": 0}),
     state(a=DONE), []),
    ("keys still unknown: stays unplanned",
     state(), lambda s: sch.planned(s, {"a": None}),
     state(), []),
    ("a plan never moves a dispatched node",
     state(a=NodeSteps("running", outstanding=2)), lambda s: sch.planned(s, {"a": 0}),
     state(a=NodeSteps("running", outstanding=2)), []),
    ("a done node whose cached result is gone runs again",
     state(a=DONE), lambda s: sch.reopened(s, "a"),
     state(a=PLANNED), []),
    ("a running node is not reopened",
     state(a=NodeSteps("running", outstanding=1)), lambda s: sch.reopened(s, "a"),
     state(a=NodeSteps("running", outstanding=1)), []),
    # -- ready and running -----------------------------------------------------------------
    ("ready: a node without inputs is dispatched with its stale keys",
     state(a=PLANNED), lambda s: sch.dispatch(s, "a", K3, (), {}),
     state(a=NodeSteps("running", outstanding=3)), [Claim("a", (0, 1, 2))]),
    ("partitioned, some keys cached: only the stale ones are claimed",
     state(a=DONE, b=PLANNED), lambda s: sch.dispatch(s, "b", {"k2": 1}, (), {}),
     state(a=DONE, b=NodeSteps("running", outstanding=1)), [Claim("b", (1,))]),
    ("keys the run computed already are not claimed again",
     state(a=DONE, b=PLANNED), lambda s: sch.dispatch(s, "b", K3, {"k1"}, {}),
     state(a=DONE, b=NodeSteps("running", outstanding=2)), [Claim("b", (1, 2))]),
    ("nothing left to run: done at once",
     state(a=DONE, b=PLANNED), lambda s: sch.dispatch(s, "b", {"k1": 0}, {"k1"}, {}),
     state(a=DONE, b=DONE), [Finish("b")]),
    ("running: a key ends, others outstanding",
     state(a=NodeSteps("running", outstanding=2)), lambda s: sch.step_finished(s, "a", True),
     state(a=NodeSteps("running", outstanding=1)), []),
    ("done: the last key ends",
     state(a=NodeSteps("running", outstanding=1)), lambda s: sch.step_finished(s, "a", True),
     state(a=DONE), [Finish("a")]),
    ("a key fails: counted, the node still ends",
     state(a=NodeSteps("running", outstanding=1)), lambda s: sch.step_finished(s, "a", False),
     state(a=NodeSteps("done", failed=1)), [Finish("a")]),
    # -- blocked: an input key failed ------------------------------------------------------
    ("a failed key blocks the same key of a reader that reads key for key",
     state(a=NodeSteps("done", failed=1), b=PLANNED),
     lambda s: sch.dispatch(s, "b", K3, (), {"a": ["k2"]}),
     state(a=NodeSteps("done", failed=1), b=NodeSteps("running", outstanding=2, blocked=1)),
     [Skip("b", ("k2",)), Claim("b", (0, 2))]),
    ("a failed key blocks every key of a reader that reads the whole node",
     state(a=NodeSteps("done", failed=1), c=PLANNED),
     lambda s: sch.dispatch(s, "c", {"": 0}, (), {"a": ["k2"]}),
     state(a=NodeSteps("done", failed=1), c=NodeSteps("done", blocked=1)),
     [Skip("c", ("",)), Finish("c")]),
    ("a blocked key blocks downstream in turn",
     state(a=DONE, b=NodeSteps("done", blocked=1), d=PLANNED),
     lambda s: sch.dispatch(s, "d", K3, (), {"b": ["k3"]}),
     state(a=DONE, b=NodeSteps("done", blocked=1), d=NodeSteps("running", outstanding=2,
                                                                blocked=1)),
     [Skip("d", ("k3",)), Claim("d", (0, 1))]),
    ("every stale key blocked: the node is done without running",
     state(a=NodeSteps("done", failed=3), b=PLANNED),
     lambda s: sch.dispatch(s, "b", {"k1": 0, "k2": 1}, (), {"a": ["k1", "k2", "k3"]}),
     state(a=NodeSteps("done", failed=3), b=NodeSteps("done", blocked=2)),
     [Skip("b", ("k1", "k2")), Finish("b")]),
    # -- streaming: keys dispatched as the keys they read succeed (engine.key_streams) ------
    ("a key whose input key succeeded is dispatched while its input runs",
     state(a=NodeSteps("running", outstanding=2), b=PLANNED),
     lambda s: sch.streamed(s, "b", (0,)),
     state(a=NodeSteps("running", outstanding=2), b=NodeSteps("streaming", outstanding=1)),
     [Claim("b", (0,))]),
    ("a streaming node whose streamed keys all ended is not done: its input still runs",
     state(a=NodeSteps("running", outstanding=2), b=NodeSteps("streaming", outstanding=1)),
     lambda s: sch.step_finished(s, "b", True),
     state(a=NodeSteps("running", outstanding=2), b=NodeSteps("streaming")), []),
    ("a streaming node is not reopened: its dispatch runs what it has left",
     state(a=NodeSteps("running", outstanding=1), b=NodeSteps("streaming", outstanding=1)),
     lambda s: sch.reopened(s, "b"),
     state(a=NodeSteps("running", outstanding=1), b=NodeSteps("streaming", outstanding=1)),
     []),
    ("its input done, the rest of a streaming node is dispatched beside what still runs",
     state(a=NodeSteps("done", failed=1), b=NodeSteps("streaming", outstanding=1)),
     lambda s: sch.dispatch(s, "b", {"k2": 1, "k3": 2}, (), {"a": ["k2"]}),
     state(a=NodeSteps("done", failed=1), b=NodeSteps("running", outstanding=2, blocked=1)),
     [Skip("b", ("k2",)), Claim("b", (2,))]),
    ("nothing left to dispatch: the node ends with its last streamed key",
     state(a=DONE, b=NodeSteps("streaming", outstanding=1)),
     lambda s: sch.dispatch(s, "b", {}, (), {}),
     state(a=DONE, b=NodeSteps("running", outstanding=1)), []),
    ("every streamed key ended before the input did: done at its dispatch",
     state(a=DONE, b=NodeSteps("streaming")),
     lambda s: sch.dispatch(s, "b", {}, (), {}),
     state(a=DONE, b=DONE), [Finish("b")]),
    # -- leased: another run computes the key ----------------------------------------------
    ("claimed: two keys are held by another run, looked at in POLL_SECONDS",
     state(a=NodeSteps("running", outstanding=3)),
     lambda s: sch.leases_seen(s, {}, {"a": 2}, now=10.0),
     state(a=NodeSteps("running", outstanding=3, leased=2), poll_at=10.0 + sch.POLL_SECONDS),
     []),
    ("claimed: one key was recorded meanwhile by another run, served",
     state(a=NodeSteps("running", outstanding=3)),
     lambda s: sch.leases_seen(s, {"a": 1}, {"a": 0}, now=10.0),
     state(a=NodeSteps("running", outstanding=2)), []),
    ("polled: the leased keys were recorded by their run, served, the node is done",
     state(a=NodeSteps("running", outstanding=2, leased=2), poll_at=10.0),
     lambda s: sch.leases_seen(s, {"a": 2}, {"a": 0}, now=10.2, polled=True),
     state(a=DONE), [Finish("a")]),
    ("polled: still held, looked at again later",
     state(a=NodeSteps("running", outstanding=2, leased=2), poll_at=10.0),
     lambda s: sch.leases_seen(s, {}, {"a": 2}, now=10.2, polled=True),
     state(a=NodeSteps("running", outstanding=2, leased=2), poll_at=10.2 + sch.POLL_SECONDS),
     []),
    ("polled: the holder died, the key is claimed back to run here",
     state(a=NodeSteps("running", outstanding=2, leased=1), poll_at=10.0),
     lambda s: sch.leases_seen(s, {}, {"a": 0}, now=10.2, polled=True),
     state(a=NodeSteps("running", outstanding=2)), []),
    ("a claim elsewhere keeps the poll time already set",
     state(a=NodeSteps("running", outstanding=2, leased=1), b=NodeSteps("running",
                                                                         outstanding=1),
           poll_at=10.1),
     lambda s: sch.leases_seen(s, {}, {"b": 0}, now=10.0),
     state(a=NodeSteps("running", outstanding=2, leased=1), b=NodeSteps("running",
                                                                         outstanding=1),
           poll_at=10.1), []),
    # -- cancelled -------------------------------------------------------------------------
    ("cancelled: what did not end is cancelled, the executor is told to kill",
     state(a=DONE, b=NodeSteps("running", outstanding=2, leased=1), c=PLANNED, poll_at=3.0),
     sch.cancel,
     state(a=DONE, b=NodeSteps("cancelled", outstanding=2, leased=1),
           c=NodeSteps("cancelled"), d=NodeSteps("cancelled"), cancelled=True),
     [Stop(cancel=True)]),
]


@pytest.mark.parametrize("name,before,event,after,actions", CASES, ids=[c[0] for c in CASES])
def test_transition(name, before, event, after, actions):
    assert event(before) == (after, actions)


# -- retry with backoff: (attempt, retries, backoff, retryable, now) -> what follows -----------

RETRIES = [
    ("first of three attempts failed: retried after the backoff", (1, 3, 0.5, True, 100.0),
     ("retry", 100.5)),
    ("second attempt failed: the wait grows", (2, 3, 0.5, True, 200.0), ("retry", 201.0)),
    ("last attempt failed", (3, 3, 0.5, True, 300.0), ("failed", None)),
    ("no retries declared", (1, 1, 0.5, True, 0.0), ("failed", None)),
    ("an exit or a changed source is never retried", (1, 3, 0.5, False, 0.0),
     ("failed", None)),
]


@pytest.mark.parametrize("name,attempt,expected", RETRIES, ids=[c[0] for c in RETRIES])
def test_retry(name, attempt, expected):
    assert attempt_failed(*attempt) == expected


# -- questions the loop asks ---------------------------------------------------------------

def test_ready_needs_every_input_done():
    s = state(a=DONE, b=PLANNED, c=PLANNED, d=PLANNED)
    assert sch.ready(s) == ["b", "c"]  # d waits for b
    assert sch.ready(state(a=NodeSteps("running", outstanding=1), b=PLANNED)) == []
    # a streaming node is ready for the rest of its keys once its inputs are done
    assert sch.ready(state(a=DONE, b=NodeSteps("streaming", outstanding=1))) == ["b"]
    assert sch.ready(state(a=NodeSteps("running", outstanding=1),
                           b=NodeSteps("streaming", outstanding=1))) == []


def test_only_leased_when_nothing_of_the_runs_own_is_in_flight():
    assert sch.only_leased(state(a=NodeSteps("running", outstanding=2, leased=2)))
    assert not sch.only_leased(state(a=NodeSteps("running", outstanding=2, leased=1)))
    assert state(a=NodeSteps("running", outstanding=2, leased=1),
                 b=NodeSteps("running", outstanding=3)).outstanding == 5


def test_poll_in_counts_down_to_zero():
    assert sch.poll_in(state(), now=5.0) is None
    assert sch.poll_in(state(poll_at=5.15), now=5.0) == pytest.approx(0.15)
    assert sch.poll_in(state(poll_at=5.15), now=9.0) == 0.0


@pytest.mark.parametrize("s,dry_run,expected", [
    (state(a=DONE, b=DONE), False, "success"),
    (state(a=NodeSteps("done", failed=1), b=NodeSteps("done", blocked=3)), False, "failed"),
    (state(a=DONE, b=NodeSteps("done", blocked=3)), False, "success"),
    (state(a=DONE, cancelled=True), False, "cancelled"),
    (state(a=DONE), True, "dry_run"),
])
def test_status(s, dry_run, expected):
    assert sch.status(s, dry_run) == expected


def test_a_run_from_plan_to_end():
    """The transitions chained as a run makes them: a fails key k2, b skips it, c is blocked."""
    s = sch.new_schedule(ORDER, INPUTS)
    s, _ = sch.planned(s, {"a": 3, "b": 3, "c": 1, "d": 0})
    assert sch.ready(s) == ["a"] and s.phase("d") == "done"
    s, actions = sch.dispatch(s, "a", K3, (), {})
    assert actions == [Claim("a", (0, 1, 2))]
    for ok in (True, False):
        s, actions = sch.step_finished(s, "a", ok)
        assert actions == []
    s, actions = sch.step_finished(s, "a", True)
    assert actions == [Finish("a")] and sch.ready(s) == ["b", "c"]
    s, actions = sch.dispatch(s, "b", K3, (), {"a": ["k2"]})
    assert actions == [Skip("b", ("k2",)), Claim("b", (0, 2))]
    s, actions = sch.dispatch(s, "c", {"": 0}, (), {"a": ["k2"]})
    assert actions == [Skip("c", ("",)), Finish("c")]
    s, _ = sch.step_finished(s, "b", True)
    s, actions = sch.step_finished(s, "b", True)
    assert actions == [Finish("b")] and s.outstanding == 0
    assert sch.status(s, dry_run=False) == "failed"
