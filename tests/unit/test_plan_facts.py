"""The planning rules that take stored facts as data (plan.history, plan.missing, plan.outputs),
on plain plans and states: no database, no files."""

from __future__ import annotations

from dataclasses import replace

from barca.graph import build_graph
from barca.packed_columns import HashColumn, JsonColumn
from barca.planner.hashes import digest
from barca.planner.history import apply_history, history_wanted
from barca.planner.missing import (TARGET_CHECK_LIMIT, input_keys_to_check, reopen,
                                   target_keys_to_check)
from barca.planner.model import NodePlan, Reason
from barca.planner.outputs import UNKNOWN_DIGEST, output_digests, with_found
from barca.state import EMPTY_STATE, NodeState, ran_entry
from test_planner import CLEAN, FETCH, PIPELINE, SUMMARY, plan_all, recorded, versions_seen

KEYS = ["r1", "r2", "r3"]


def node_plan(kind: str = "asset", run: tuple[int, ...] = (), codes: dict | None = None,
              keys: list[str] = KEYS) -> NodePlan:
    codes = codes or {}
    return NodePlan("p.py:x", kind, JsonColumn(keys), HashColumn(digest(k) for k in keys),
                    run=run, reasons={i: Reason(codes.get(i, "changed")) for i in run},
                    partitioned=True, dims=("retailer",))


def state_of(plan: NodePlan, outputs: list[str] | None = None) -> NodeState:
    return NodeState(JsonColumn(list(plan.keys)), HashColumn(list(plan.run_hashes)), 0, ["ctx"],
                     (), "json", None if outputs is None else HashColumn(outputs))


# -- going back to an older success ---------------------------------------------------------

def test_only_changed_new_or_never_run_keys_of_assets_look_for_an_older_success():
    plan = node_plan(run=(0, 1, 2), codes={0: "changed", 1: "refresh", 2: "new_key"})
    assert history_wanted(plan) == [("r1", digest("r1")), ("r3", digest("r3"))]
    assert history_wanted(replace(plan, kind="task")) == []


def test_a_hit_is_served_from_its_older_result_and_leaves_the_run():
    plan = node_plan(run=(0, 2))
    hit = ("r3", digest("r3"), "ctx-old", [], "json", None)
    new_plan, state = apply_history(plan, EMPTY_STATE, [hit])
    assert new_plan.run == (0,) and set(new_plan.reasons) == {0}
    assert state.find("r3") == 0 and state.run_hash[0] == digest("r3")
    assert EMPTY_STATE.find("r3") is None  # the input state is left as it was
    assert apply_history(plan, EMPTY_STATE, []) == (plan, EMPTY_STATE)


# -- cached files that are gone -------------------------------------------------------------

def test_a_target_checks_the_keys_it_serves_from_cache_up_to_a_limit():
    assert target_keys_to_check(node_plan(run=(1,))) == ["r1", "r3"]
    many = [f"k{i}" for i in range(TARGET_CHECK_LIMIT + 1)]
    assert target_keys_to_check(node_plan(keys=many)) == []
    assert target_keys_to_check(node_plan(kind="sensor")) == []


def test_reopening_plans_the_missing_keys_again_with_their_reason():
    plan = reopen(node_plan(run=(2,), codes={2: "new_key"}), ["r1"])
    assert plan.run == (0, 2)
    assert plan.reasons[0] == Reason("artifact_missing") and plan.reasons[2].code == "new_key"


def test_a_stale_key_checks_the_cached_input_it_reads_unless_it_ran_fails_or_will_run():
    graph = build_graph(PIPELINE)
    value = {"r1": "v1", "r2": "v1", "r3": "v1"}
    plans = plan_all(PIPELINE, known=versions_seen(value))
    states = recorded(plans)
    plans = plan_all(PIPELINE, states=states, known=versions_seen(value))
    plans[CLEAN] = reopen(plans[CLEAN], ["r1", "r2", "r3"])  # clean runs; fetch is cached
    complete = {FETCH}
    assert input_keys_to_check(graph, plans, CLEAN, {}, {}, complete) == {
        FETCH: ["r1", "r2", "r3"]}
    ran = {FETCH: {"r2": ran_entry(1, "json")}}
    assert input_keys_to_check(graph, plans, CLEAN, {FETCH: ["r3"]}, ran, complete) == {
        FETCH: ["r1"]}
    plans[FETCH] = reopen(plans[FETCH], ["r1"])  # fetch will run r1 itself
    assert input_keys_to_check(graph, plans, CLEAN, {}, {}, set()) == {FETCH: ["r2", "r3"]}
    assert input_keys_to_check(graph, plans, SUMMARY, {}, {}, complete) == {}  # cached


# -- output digests ---------------------------------------------------------------------------

def test_with_the_stored_keys_only_the_keys_that_ran_get_new_digests():
    plan = node_plan()
    state = state_of(plan, [digest("a"), digest("b"), digest("c")])
    digests, lookup = output_digests(plan, state, {"r2": ran_entry(1, "json")},
                                     {"r2": digest("new")})
    assert list(digests) == [digest("a"), digest("new"), digest("c")] and lookup == []


def test_keys_without_a_digest_on_record_are_named_for_lookup_and_filled_in():
    plan = node_plan()
    state = state_of(node_plan(keys=["r1"]), [digest("a")])
    digests, lookup = output_digests(plan, state, {}, {"r3": digest("ran")})
    assert lookup == [("r2", digest("r2"))]
    filled = with_found(plan, digests, {})
    assert list(filled) == [digest("a"), UNKNOWN_DIGEST, digest("ran")]
    assert list(with_found(plan, digests, {"r2": digest("found")}))[1] == digest("found")
