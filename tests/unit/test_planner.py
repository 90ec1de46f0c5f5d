"""Planner rules: which keys run, which are cached, and the reason each one carries.

The planner is pure, so every input here is a literal: `Definition`s, a `Graph` from
`build_graph`, `NodeState` columns, `KnownOutput`s and `PlanOptions`. Stored state is written
as the columns store/ would load after a successful run (see `recorded`), never produced by
running anything. Tests compare whole `NodePlan`s or their fields.

The pipeline most tests use (`PIPELINE`):

    versions  sensor, returns {retailer: version}          (a keyed source)
    fetch     partitions_from(versions)                     one key per retailer
    clean     partitions_from(fetch), reads fetch           the same key, key by key
    summary   reads collect(clean)                          one fan-in over every key
"""

from __future__ import annotations

import random
from typing import Any, Iterable, Mapping

import pytest

from barca.packed_columns import HashColumn, JsonColumn, pack_chunks
from barca.discover.model import Definition, DimensionSpec, InputSpec
from barca.graph import Graph, build_graph
from barca.planner.hashes import column_digest, context_digest, digest, run_hash
from barca.planner.keys import keys_from_value
from barca.planner.model import KnownOutput, NodePlan, PlanOptions, Reason
from barca.planner.planner import plan_nodes, refreshed_nodes
from barca.state import NodeState
from barca.store.state_codec import decode_state, encode_header, state_columns

FILE = "p.py"
VERSIONS, FETCH, CLEAN, SUMMARY = "p.py:versions", "p.py:fetch", "p.py:clean", "p.py:summary"


def stored(state: NodeState) -> tuple[bytes, dict[str, tuple[bytes, ...]]]:
    """A state as store/ writes it: its header and every chunk of its columns."""
    return encode_header(state), {n: tuple(c) for n, c in state_columns(state).items()}


def definition(name: str, kind: str = "asset", *, inputs: Iterable[InputSpec] = (),
               dimensions: Iterable[DimensionSpec] = (), code: str | None = None,
               cutoff: bool = False, env: tuple[str, ...] = ()) -> Definition:
    """A Definition literal; its definition hash and `code` part follow `code`."""
    code = code if code is not None else f"def {name}(): return 1"
    inputs = tuple(inputs)
    return Definition(
        node_id=f"{FILE}:{name}", name=name, function=name, file=FILE, line=1, kind=kind,
        params=tuple(spec.param for spec in inputs), annotations=(), inputs=inputs,
        dimensions=tuple(dimensions),
        freshness="manual" if kind == "sensor" else "always", schedule=None, serializer=None,
        retries=0, retry_backoff=0.0, timeout_seconds=0.0, env=env, cutoff=cutoff, weight=1,
        batch=None, description=None, tags=(),
        definition_hash=digest(("definition", name, code)),
        hash_parts=(("code", digest(("code", code))),),
    )


def pipeline(*, fetch_code: str | None = None, summary_env: tuple[str, ...] = ()
             ) -> list[Definition]:
    return [
        definition("versions", "sensor"),
        definition("fetch", code=fetch_code,
                   dimensions=[DimensionSpec("retailer", "from", source=VERSIONS)]),
        definition("clean", inputs=[InputSpec("raw", FETCH)],
                   dimensions=[DimensionSpec("retailer", "from", source=FETCH)]),
        definition("summary", inputs=[InputSpec("rows", CLEAN, "collect")], env=summary_env),
    ]


PIPELINE = pipeline()


def source_output(value: Any, output: str = "bytes") -> KnownOutput:
    """What the coordinator knows of a key source that returned `value` (list or dict)."""
    keys, values, order = keys_from_value(value)
    return KnownOutput(HashColumn([digest(output)]), JsonColumn(keys),
                       None if values is None else JsonColumn([values[k] for k in keys]),
                       None if order is None else JsonColumn(order))


def output_of(text: str) -> KnownOutput:
    """What the coordinator knows of an unpartitioned node whose bytes digest to H(text)."""
    return KnownOutput(HashColumn([digest(text)]))


def versions_seen(value: Mapping[str, Any]) -> dict[str, KnownOutput]:
    """What the coordinator knows once the `versions` sensor has run and returned `value`."""
    return {VERSIONS: source_output(value, "versions-bytes")}


def packed_seen(value: Mapping[str, Any]) -> dict[str, KnownOutput]:
    """`versions_seen`, with keys and values packed as a worker sends them (keys sorted)."""
    keys = sorted(value)
    values = [value[k] for k in keys]
    return {VERSIONS: KnownOutput(HashColumn([digest("versions-bytes")]),
                                  JsonColumn(chunks=pack_chunks(keys), n=len(keys)),
                                  JsonColumn(chunks=pack_chunks(values), n=len(values)))}


def plan_all(definitions: list[Definition], states: Mapping[str, NodeState] | None = None,
             known: Mapping[str, KnownOutput] | None = None,
             options: PlanOptions = PlanOptions(),
             refreshed: Mapping[str, Reason] | None = None,
             expr_keys: Mapping[tuple[str, str], list[str]] | None = None) -> dict[str, NodePlan]:
    graph = build_graph(definitions)
    return plan_nodes(graph, graph.order, states or {}, known or {}, options, expr_keys or {},
                      refreshed or {})


def recorded(plans: Mapping[str, NodePlan]) -> dict[str, NodeState]:
    """The snapshot store/ loads after every key of every decided plan succeeded."""
    states = {}
    for node_id, p in plans.items():
        if p.unknown:
            continue
        states[node_id] = NodeState(
            keys=JsonColumn(list(p.keys)), run_hash=HashColumn(list(p.run_hashes)), context=0,
            contexts=[p.context], signature=p.signatures, fmt="json",
            output_hash=HashColumn(digest(("out", h)) for h in p.run_hashes),
            parts={p.context: dict(p.context_parts)})
    return states


def loaded(states: Mapping[str, NodeState]) -> dict[str, NodeState]:
    """The same states as store/ hands them back: encoded, written, decoded (packed)."""
    return {n: decode_state(*stored(s)) for n, s in states.items()}


def column_like(column: Any, items: list) -> Any:
    return HashColumn(items) if isinstance(column, HashColumn) else JsonColumn(items)


def shuffled(state: NodeState, seed: int) -> NodeState:
    """The same records with every per-key column permuted the same way."""
    order = list(range(len(state)))
    random.Random(seed).shuffle(order)

    def pick(column: Any) -> Any:
        return None if column is None else column_like(column, [column[j] for j in order])

    context = state.context if isinstance(state.context, int) else pick(list(state.context))
    fmt = state.fmt if isinstance(state.fmt, str) else [state.fmt[j] for j in order]
    return NodeState(pick(state.keys), pick(state.run_hash), context, list(state.contexts),
                     tuple(pick(c) for c in state.signature), fmt, pick(state.output_hash),
                     dict(state.parts), dict(state.failed))


def plan_signature(p: NodePlan, i: int) -> list[Any]:
    """Key i's own hash parts, one per signature column."""
    return [column[i] for column in p.signatures]


def labels_of(plan):
    """The keys as users see them (`day=1,region=emea`)."""
    return [plan.label(k) for k in plan.keys]


def keys_of(p: NodePlan) -> list[str]:
    return list(p.keys)


def hashes_of(p: NodePlan) -> list[str]:
    return list(p.run_hashes)


def decisions(plans: Mapping[str, NodePlan]) -> dict[str, tuple]:
    """Per node: (key -> run hash, keys that run, key -> reason): what a plan decides."""
    return {n: (dict(zip(p.keys, p.run_hashes)), sorted(p.keys[i] for i in p.run),
                {p.keys[i]: r for i, r in p.reasons.items()}, p.unknown)
            for n, p in plans.items()}


def running(p: NodePlan) -> dict[str, Reason]:
    """key -> reason for every key that runs."""
    return {p.keys[i]: p.reasons[i] for i in p.run}


# --- never run -----------------------------------------------------------------------------

def test_never_run_pipeline_runs_every_key_with_reason_never_run():
    plans = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2}))

    assert running(plans[VERSIONS]) == {"": Reason("sensor")}
    assert running(plans[FETCH]) == {"r1": Reason("never_run"), "r2": Reason("never_run")}
    assert running(plans[CLEAN]) == {"r1": Reason("never_run"), "r2": Reason("never_run")}
    assert running(plans[SUMMARY]) == {"": Reason("never_run")}
    assert [plans[n].action for n in (VERSIONS, FETCH, CLEAN, SUMMARY)] == ["run"] * 4


def test_never_run_keyed_node_plan_is_built_from_the_documented_hash_parts():
    """context = H(definition, unkeyed parts); run hash = H(context, key, this key's value)."""
    versions, fetch = PIPELINE[0], PIPELINE[1]
    plans = plan_all(PIPELINE[:2], known=versions_seen({"r1": 1, "r2": {"b": 2, "a": 1}}))

    sensor_context = context_digest(versions.definition_hash, {})
    sensor_run = run_hash(sensor_context, "", None, ())
    context = context_digest(fetch.definition_hash, {"sensor p.py:versions": sensor_run})
    assert plans[FETCH] == NodePlan(
        node_id=FETCH, kind="asset", keys=JsonColumn(["r1", "r2"]),
        run_hashes=HashColumn([run_hash(context, "r1", [1], (0,)),
                               run_hash(context, "r2", [{"a": 1, "b": 2}], (0,))]),
        context=context,
        context_parts={"code": dict(fetch.hash_parts)["code"],
                       "sensor p.py:versions": sensor_run},
        signatures=(JsonColumn([1, {"b": 2, "a": 1}]),),
        signature_labels=("value p.py:versions",),
        run=(0, 1), reasons={0: Reason("never_run"), 1: Reason("never_run")},
        key_values=JsonColumn([1, {"b": 2, "a": 1}]), partitioned=True, dims=("retailer",))
    assert plans[VERSIONS].run_hashes == HashColumn([sensor_run])


# --- cached --------------------------------------------------------------------------------

STORED = {name: digest(("stored", name)) for name in
          ("fetch-r1", "fetch-r2", "clean-r1", "clean-r2", "summary")}


def test_state_matching_context_and_signatures_runs_nothing_and_reuses_stored_run_hashes():
    values = {"r1": 1, "r2": 2}
    first = plan_all(PIPELINE, known=versions_seen(values))
    fetch_ctx, clean_ctx = first[FETCH].context, first[CLEAN].context
    summary_ctx = context_digest(PIPELINE[3].definition_hash, {
        "input p.py:clean": column_digest(JsonColumn(["r1", "r2"]),
                                          HashColumn([STORED["clean-r1"], STORED["clean-r2"]]))})
    states = {
        FETCH: NodeState(keys=JsonColumn(["r1", "r2"]),
                         run_hash=HashColumn([STORED["fetch-r1"], STORED["fetch-r2"]]),
                         context=0, contexts=[fetch_ctx], signature=(JsonColumn([1, 2]),)),
        CLEAN: NodeState(keys=JsonColumn(["r1", "r2"]),
                         run_hash=HashColumn([STORED["clean-r1"], STORED["clean-r2"]]),
                         context=0, contexts=[clean_ctx],
                         signature=(HashColumn([STORED["fetch-r1"], STORED["fetch-r2"]]),)),
        SUMMARY: NodeState(keys=JsonColumn([""]), run_hash=HashColumn([STORED["summary"]]),
                           context=0, contexts=[summary_ctx]),
    }

    plans = plan_all(PIPELINE, states, versions_seen(values))

    # these hashes come from the state, not from hashing the current parts
    assert hashes_of(plans[FETCH]) == [STORED["fetch-r1"], STORED["fetch-r2"]]
    assert hashes_of(plans[CLEAN]) == [STORED["clean-r1"], STORED["clean-r2"]]
    assert hashes_of(plans[SUMMARY]) == [STORED["summary"]]
    for node_id in (FETCH, CLEAN, SUMMARY):
        assert (plans[node_id].run, dict(plans[node_id].reasons), plans[node_id].action) == \
            ((), {}, "cached")
    assert plans[VERSIONS].run == (0,)  # a sensor always observes


def test_replanning_the_recorded_state_of_a_first_plan_runs_nothing():
    values = {"r1": 1, "r2": 2, "r3": 3}
    first = plan_all(PIPELINE, known=versions_seen(values))
    again = plan_all(PIPELINE, recorded(first), versions_seen(values))

    for node_id in (FETCH, CLEAN, SUMMARY):
        assert again[node_id].run == ()
        assert hashes_of(again[node_id]) == hashes_of(first[node_id])


def test_task_always_runs_with_reason_task_even_when_its_state_matches():
    defs = [definition("a"), definition("report", "task", inputs=[InputSpec("a", "p.py:a")])]
    first = plan_all(defs)
    again = plan_all(defs, recorded(first))

    assert running(again["p.py:a"]) == {}
    assert running(again["p.py:report"]) == {"": Reason("task")}
    assert hashes_of(again["p.py:report"]) == hashes_of(first["p.py:report"])


# --- what changed --------------------------------------------------------------------------

def test_one_changed_keyed_value_runs_that_key_and_the_same_key_downstream():
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2, "r3": 3}))
    plans = plan_all(PIPELINE, recorded(first), versions_seen({"r1": 1, "r2": 20, "r3": 3}))

    assert running(plans[FETCH]) == {"r2": Reason("changed", ("value p.py:versions",))}
    assert running(plans[CLEAN]) == {"r2": Reason("changed", ("input p.py:fetch",))}
    assert running(plans[SUMMARY]) == {"": Reason("changed", ("input p.py:clean",))}
    # the unchanged keys keep their hashes; the changed one gets a new one
    for node_id in (FETCH, CLEAN):
        old, new = hashes_of(first[node_id]), hashes_of(plans[node_id])
        assert (new[0], new[2]) == (old[0], old[2])
        assert new[1] != old[1]
    assert plans[FETCH].action == "partial"


def test_keyed_value_changed_back_to_an_earlier_value_gets_the_earlier_run_hash():
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2}))
    second = plan_all(PIPELINE, recorded(first), versions_seen({"r1": 1, "r2": 20}))
    back = plan_all(PIPELINE, recorded(second), versions_seen({"r1": 1, "r2": 2}))

    assert hashes_of(back[FETCH]) == hashes_of(first[FETCH])
    assert hashes_of(back[CLEAN]) == hashes_of(first[CLEAN])


@pytest.mark.parametrize("new_value", [1.0, True], ids=["float", "bool"])
def test_keyed_value_with_a_different_canonical_json_reruns_the_key(new_value):
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2}))
    plans = plan_all(PIPELINE, loaded(recorded(first)),
                     packed_seen({"r1": new_value, "r2": 2}))

    assert running(plans[FETCH]) == {"r1": Reason("changed", ("value p.py:versions",))}


def test_state_loaded_from_its_stored_encoding_plans_like_the_state_itself():
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2, "r3": 3}))
    now = {"r1": 1, "r2": 20, "r3": 3, "r4": 4}

    in_memory = plan_all(PIPELINE, recorded(first), versions_seen(now))
    from_store = plan_all(PIPELINE, loaded(recorded(first)), packed_seen(now))

    assert decisions(from_store) == decisions(in_memory)
    assert running(from_store[FETCH]) == {"r2": Reason("changed", ("value p.py:versions",)),
                                          "r4": Reason("new_key")}


def test_new_key_runs_only_that_key_with_reason_new_key():
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2}))
    plans = plan_all(PIPELINE, recorded(first), versions_seen({"r1": 1, "r2": 2, "r9": 9}))

    assert running(plans[FETCH]) == {"r9": Reason("new_key")}
    assert running(plans[CLEAN]) == {"r9": Reason("new_key")}
    assert hashes_of(plans[FETCH])[:2] == hashes_of(first[FETCH])
    assert running(plans[SUMMARY]) == {"": Reason("changed", ("input p.py:clean",))}


@pytest.mark.parametrize("remaining", [{"r1": 1, "r2": 2}, {"r2": 2, "r3": 3}],
                         ids=["last-key-removed", "first-key-removed"])
def test_removed_key_runs_no_key_and_only_the_collect_fan_in_reruns(remaining):
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2, "r3": 3}))
    plans = plan_all(PIPELINE, recorded(first), versions_seen(remaining))

    old = dict(zip(first[FETCH].keys, first[FETCH].run_hashes))
    assert keys_of(plans[FETCH]) == list(remaining)
    assert hashes_of(plans[FETCH]) == [old[k] for k in remaining]
    assert running(plans[FETCH]) == {}
    assert running(plans[CLEAN]) == {}
    # the list collect(clean) hands summary has one item fewer: that is a changed input
    assert running(plans[SUMMARY]) == {"": Reason("changed", ("input p.py:clean",))}


def test_changed_definition_hash_runs_every_key_and_names_code():
    values = {"r1": 1, "r2": 2}
    first = plan_all(PIPELINE, known=versions_seen(values))
    edited = pipeline(fetch_code="def fetch(): return 2")
    plans = plan_all(edited, recorded(first), versions_seen(values))

    assert running(plans[FETCH]) == {"r1": Reason("changed", ("code",)),
                                     "r2": Reason("changed", ("code",))}
    assert running(plans[CLEAN]) == {"r1": Reason("changed", ("input p.py:fetch",)),
                                     "r2": Reason("changed", ("input p.py:fetch",))}
    assert running(plans[SUMMARY]) == {"": Reason("changed", ("input p.py:clean",))}


def test_code_and_value_changed_together_are_both_named_code_first():
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2}))
    edited = pipeline(fetch_code="def fetch(): return 2")
    plans = plan_all(edited, recorded(first), versions_seen({"r1": 1, "r2": 20}))

    assert running(plans[FETCH]) == {
        "r1": Reason("changed", ("code",)),
        "r2": Reason("changed", ("code", "value p.py:versions"))}


def test_changed_context_without_stored_parts_still_runs_and_blames_code():
    """Unknown is never cached: a context whose parts were not kept reruns every key."""
    values = {"r1": 1, "r2": 2}
    first = plan_all(PIPELINE, known=versions_seen(values))
    states = recorded(first)
    states[FETCH].parts.clear()
    plans = plan_all(pipeline(fetch_code="def fetch(): return 2"), states, versions_seen(values))

    assert running(plans[FETCH]) == {"r1": Reason("changed", ("code",)),
                                     "r2": Reason("changed", ("code",))}


def test_changed_env_value_reruns_the_reader_and_names_the_variable():
    defs = pipeline(summary_env=("TOKEN",))
    known = versions_seen({"r1": 1})
    first = plan_all(defs, known=known, options=PlanOptions(env={"TOKEN": "a"}))
    same = plan_all(defs, recorded(first), known, PlanOptions(env={"TOKEN": "a"}))
    other = plan_all(defs, recorded(first), known, PlanOptions(env={"TOKEN": "b"}))

    assert running(same[SUMMARY]) == {}
    assert running(other[SUMMARY]) == {"": Reason("changed", ("env TOKEN",))}
    assert running(other[CLEAN]) == {}


def test_node_with_two_keyed_parts_names_only_the_part_that_changed():
    """`enrich` reads fetch key by key and takes its keys (and values) from versions:
    each key's signature is [fetch's run hash for the key, the key's value], in label order."""
    enrich = definition("enrich", inputs=[InputSpec("raw", FETCH)],
                        dimensions=[DimensionSpec("retailer", "from", source=VERSIONS)])
    values = versions_seen({"r1": 1, "r2": 2})
    first = plan_all([*PIPELINE, enrich], known=values)
    plan = first["p.py:enrich"]
    assert plan.signature_labels == ("input p.py:fetch", "value p.py:versions")
    assert plan.signatures == (first[FETCH].run_hashes, JsonColumn([1, 2]))
    assert [plan_signature(plan, i) for i in range(2)] == \
        [[first[FETCH].run_hashes[0], 1], [first[FETCH].run_hashes[1], 2]]

    code_edit = plan_all([*pipeline(fetch_code="def fetch(): return 2"), enrich],
                         recorded(first), values)
    assert running(code_edit["p.py:enrich"]) == {
        "r1": Reason("changed", ("input p.py:fetch",)),
        "r2": Reason("changed", ("input p.py:fetch",))}

    value_edit = plan_all([*PIPELINE, enrich], recorded(first),
                          versions_seen({"r1": 1, "r2": 20}))
    assert running(value_edit["p.py:enrich"]) == {
        "r2": Reason("changed", ("input p.py:fetch", "value p.py:versions"))}


# --- refresh -------------------------------------------------------------------------------

def test_refresh_cascades_to_every_asset_reading_the_refreshed_one():
    graph = build_graph(PIPELINE)
    cone = graph.cone([SUMMARY])

    assert refreshed_nodes(graph, cone, PlanOptions(refresh=frozenset({FETCH}))) == {
        FETCH: Reason("refresh"),
        CLEAN: Reason("refresh_cascade", origin=FETCH),
        SUMMARY: Reason("refresh_cascade", origin=FETCH)}


def test_refresh_without_cascade_refreshes_only_the_named_asset():
    graph = build_graph(PIPELINE)
    options = PlanOptions(refresh=frozenset({FETCH}), cascade=False)

    assert refreshed_nodes(graph, graph.cone([SUMMARY]), options) == {FETCH: Reason("refresh")}


def test_refresh_cascade_stays_inside_the_cone():
    graph = build_graph(PIPELINE)
    options = PlanOptions(refresh=frozenset({FETCH}))

    assert refreshed_nodes(graph, graph.cone([CLEAN]), options) == {
        FETCH: Reason("refresh"), CLEAN: Reason("refresh_cascade", origin=FETCH)}


def test_refresh_all_refreshes_every_asset_of_the_cone_but_no_sensor():
    graph = build_graph(PIPELINE)
    options = PlanOptions(refresh_all=True)

    assert refreshed_nodes(graph, graph.cone([SUMMARY]), options) == {
        FETCH: Reason("refresh_all"), CLEAN: Reason("refresh_all"),
        SUMMARY: Reason("refresh_all")}
    assert refreshed_nodes(graph, graph.cone([FETCH]), options) == {
        FETCH: Reason("refresh_all")}


def test_refreshed_node_runs_every_key_with_the_unchanged_run_hashes():
    values = versions_seen({"r1": 1, "r2": 2})
    first = plan_all(PIPELINE, known=values)
    graph = build_graph(PIPELINE)
    refreshed = refreshed_nodes(graph, graph.cone([SUMMARY]),
                                PlanOptions(refresh=frozenset({FETCH})))
    plans = plan_all(PIPELINE, recorded(first), values, refreshed=refreshed)

    assert running(plans[FETCH]) == {"r1": Reason("refresh"), "r2": Reason("refresh")}
    cascade = Reason("refresh_cascade", origin=FETCH)
    assert running(plans[CLEAN]) == {"r1": cascade, "r2": cascade}
    assert running(plans[SUMMARY]) == {"": cascade}
    for node_id in (FETCH, CLEAN, SUMMARY):
        assert hashes_of(plans[node_id]) == hashes_of(first[node_id])


# --- failures ------------------------------------------------------------------------------

def test_key_whose_last_attempt_failed_with_the_same_run_hash_runs_with_reason_failed():
    values = versions_seen({"r1": 1, "r2": 2})
    first = plan_all(PIPELINE, known=values)
    states = recorded(first)
    fetch = states[FETCH]
    # r2 never succeeded: its only attempt, under today's run hash, failed
    states[FETCH] = NodeState(keys=JsonColumn(["r1"]), run_hash=HashColumn([fetch.run_hash[0]]),
                              context=0, contexts=fetch.contexts, signature=(JsonColumn([1]),),
                              parts=fetch.parts,
                              failed={"r2": [first[FETCH].run_hashes[1], "ValueError: boom"]})
    plans = plan_all(PIPELINE, states, values)

    assert running(plans[FETCH]) == {"r2": Reason("failed", origin="ValueError: boom")}


def test_failed_attempt_under_another_run_hash_reports_what_changed_instead():
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2}))
    states = recorded(first)
    states[FETCH].failed["r2"] = [digest("an older attempt"), "ValueError: boom"]
    plans = plan_all(PIPELINE, states, versions_seen({"r1": 1, "r2": 20}))

    assert running(plans[FETCH]) == {"r2": Reason("changed", ("value p.py:versions",))}


def test_changed_key_that_failed_under_its_new_run_hash_runs_with_reason_failed():
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2}))
    attempt = plan_all(PIPELINE, recorded(first), versions_seen({"r1": 1, "r2": 20}))
    states = recorded(first)
    states[FETCH].failed["r2"] = [attempt[FETCH].run_hashes[1], "KeyError: 'x'"]
    plans = plan_all(PIPELINE, states, versions_seen({"r1": 1, "r2": 20}))

    assert running(plans[FETCH]) == {"r2": Reason("failed", origin="KeyError: 'x'")}


# --- outputs not known yet -----------------------------------------------------------------

CUTOFF_PIPELINE = [
    definition("raw", cutoff=True),
    definition("report", inputs=[InputSpec("raw", "p.py:raw")]),
    definition("final", inputs=[InputSpec("report", "p.py:report")]),
]


def test_reader_of_a_cutoff_asset_waits_for_its_output_as_cutoff_pending():
    plans = plan_all(CUTOFF_PIPELINE)

    assert running(plans["p.py:raw"]) == {"": Reason("never_run")}
    report, final = plans["p.py:report"], plans["p.py:final"]
    assert (report.unknown, report.unknown_detail, report.action) == \
        ("cutoff_pending", "p.py:raw", "unknown")
    assert (report.run, keys_of(report)) == ((), [])
    assert (final.unknown, final.unknown_detail) == ("upstream_unknown", "p.py:report")


def test_cutoff_upstream_rerun_with_the_same_output_bytes_does_not_rerun_its_reader():
    same_bytes = {"p.py:raw": output_of("raw-bytes-1")}
    first = plan_all(CUTOFF_PIPELINE, known=same_bytes)
    edited = [definition("raw", cutoff=True, code="def raw(): return 0 + 1"),
              *CUTOFF_PIPELINE[1:]]
    plans = plan_all(edited, recorded(first), same_bytes)

    assert running(plans["p.py:raw"]) == {"": Reason("changed", ("code",))}
    assert running(plans["p.py:report"]) == {}
    assert hashes_of(plans["p.py:report"]) == hashes_of(first["p.py:report"])

    other_bytes = {"p.py:raw": output_of("raw-bytes-2")}
    plans = plan_all(edited, recorded(first), other_bytes)
    assert running(plans["p.py:report"]) == {"": Reason("changed", ("input p.py:raw",))}
    assert running(plans["p.py:final"]) == {"": Reason("changed", ("input p.py:report",))}


def test_keyed_node_waits_for_a_key_source_asset_that_has_not_run_as_partitions_unknown():
    defs = [definition("listing"),
            definition("item", dimensions=[DimensionSpec("sku", "from", source="p.py:listing")])]
    plans = plan_all(defs)

    item = plans["p.py:item"]
    assert (item.unknown, item.unknown_detail, keys_of(item), item.run) == \
        ("partitions_unknown", "p.py:listing", [], ())

    listing = {"p.py:listing": source_output(["a", "b", 3])}
    item = plan_all(defs, known=listing)["p.py:item"]
    assert (item.unknown, keys_of(item), item.key_values) == (None, ["a", "b", "3"], None)
    assert running(item) == {"a": Reason("never_run"), "b": Reason("never_run"),
                             "3": Reason("never_run")}


def test_keyed_node_waits_for_an_unobserved_sensor_as_sensor_output_unknown():
    plans = plan_all(PIPELINE)

    assert (plans[FETCH].unknown, plans[FETCH].unknown_detail) == \
        ("sensor_output_unknown", VERSIONS)
    assert (plans[CLEAN].unknown, plans[CLEAN].unknown_detail) == ("upstream_unknown", FETCH)


# --- --partition ---------------------------------------------------------------------------

REGIONS = ("emea", "amer", "apac")
SELECTION_PIPELINE = [
    definition("daily", dimensions=[DimensionSpec("region", "static", keys=REGIONS)]),
    definition("mirror", inputs=[InputSpec("daily", "p.py:daily")],
               dimensions=[DimensionSpec("region", "static", keys=REGIONS)]),
    definition("total", inputs=[InputSpec("rows", "p.py:daily", "collect")]),
    definition("after_total", inputs=[InputSpec("total", "p.py:total")]),
    definition("grid", dimensions=[DimensionSpec("region", "static", keys=("emea", "amer")),
                                   DimensionSpec("day", "static", keys=("2", "1"))]),
]


def test_partition_selection_narrows_keys_and_skips_the_collect_fan_in():
    options = PlanOptions(partition={"region": frozenset({"emea"})})
    plans = plan_all(SELECTION_PIPELINE, options=options)

    assert running(plans["p.py:daily"]) == {"emea": Reason("never_run")}
    assert running(plans["p.py:mirror"]) == {"emea": Reason("never_run")}
    assert labels_of(plans["p.py:grid"]) == ["day=2,region=emea", "day=1,region=emea"]
    total = plans["p.py:total"]
    assert (total.unknown, total.unknown_detail, total.action, total.run) == \
        ("partition_selection", "p.py:daily", "skipped", ())
    assert (plans["p.py:after_total"].unknown, plans["p.py:after_total"].unknown_detail) == \
        ("partition_selection", "p.py:total")


def test_without_partition_selection_every_declared_key_is_planned():
    plans = plan_all(SELECTION_PIPELINE)

    assert keys_of(plans["p.py:daily"]) == list(REGIONS)
    assert labels_of(plans["p.py:grid"]) == ["day=2,region=emea", "day=2,region=amer",
                                       "day=1,region=emea", "day=1,region=amer"]
    assert plans["p.py:total"].unknown is None
    assert running(plans["p.py:total"]) == {"": Reason("never_run")}


def test_partition_selection_on_another_dimension_leaves_keys_alone():
    plans = plan_all(SELECTION_PIPELINE, options=PlanOptions(partition={"day": frozenset({"1"})}))

    assert keys_of(plans["p.py:daily"]) == list(REGIONS)
    assert plans["p.py:total"].unknown is None
    assert labels_of(plans["p.py:grid"]) == ["day=1,region=emea", "day=1,region=amer"]


def test_partition_selection_does_not_change_the_run_hash_of_a_selected_key():
    full = plan_all(SELECTION_PIPELINE)
    narrow = plan_all(SELECTION_PIPELINE,
                      options=PlanOptions(partition={"region": frozenset({"amer"})}))

    assert hashes_of(narrow["p.py:daily"]) == [full["p.py:daily"].run_hashes[1]]
    assert hashes_of(narrow["p.py:mirror"]) == [full["p.py:mirror"].run_hashes[1]]


def test_expression_dimension_takes_its_keys_from_expr_keys():
    defs = [definition("by_day", dimensions=[DimensionSpec("day", "expr", expr="days()")])]
    plans = plan_all(defs, expr_keys={("p.py:by_day", "day"): ["d2", "d1"]})

    assert keys_of(plans["p.py:by_day"]) == ["d2", "d1"]


# --- determinism ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_plan_does_not_depend_on_the_order_of_stored_keys(seed):
    before = {f"r{i:02d}": i for i in range(40)}
    after = {k: v for k, v in before.items() if k != "r30"}
    after.update({"r05": 500, "r17": 1700, "r40": 40})
    first = plan_all(PIPELINE, known=versions_seen(before))
    states = recorded(first)

    in_order = plan_all(PIPELINE, states, versions_seen(after))
    permuted = plan_all(PIPELINE, {n: shuffled(s, seed) for n, s in states.items()},
                        versions_seen(after))

    assert decisions(permuted) == decisions(in_order)
    assert running(in_order[FETCH]) == {
        "r05": Reason("changed", ("value p.py:versions",)),
        "r17": Reason("changed", ("value p.py:versions",)),
        "r40": Reason("new_key")}


def test_run_hashes_do_not_depend_on_dict_order_of_keyed_values():
    value_a = {"r1": {"version": 3, "tags": {"x": 1, "y": 2}}, "r2": {"a": 1, "b": 2}}
    value_b = {"r1": {"tags": {"y": 2, "x": 1}, "version": 3}, "r2": {"b": 2, "a": 1}}
    a = plan_all(PIPELINE, known=versions_seen(value_a))
    b = plan_all(PIPELINE, known=versions_seen(value_b))

    assert hashes_of(b[FETCH]) == hashes_of(a[FETCH])
    assert hashes_of(b[CLEAN]) == hashes_of(a[CLEAN])
    assert hashes_of(b[SUMMARY]) == hashes_of(a[SUMMARY])


def test_reordered_keyed_source_keeps_each_keys_run_hash_and_runs_nothing():
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2, "r3": 3}))
    plans = plan_all(PIPELINE, recorded(first), versions_seen({"r3": 3, "r1": 1, "r2": 2}))

    assert keys_of(plans[FETCH]) == ["r1", "r2", "r3"]  # a dict source's keys come sorted
    assert dict(zip(plans[FETCH].keys, plans[FETCH].run_hashes)) == \
        dict(zip(first[FETCH].keys, first[FETCH].run_hashes))
    assert running(plans[FETCH]) == {}
    assert running(plans[CLEAN]) == {}


def collect_pipeline(regions: tuple[str, ...], days: tuple[str, ...]) -> list[Definition]:
    """Static keys in the order given, each node read whole by a collect() fan-in."""
    return [
        definition("daily", dimensions=[DimensionSpec("region", "static", keys=regions)]),
        definition("total", inputs=[InputSpec("rows", "p.py:daily", "collect")]),
        definition("grid", dimensions=[DimensionSpec("region", "static", keys=regions),
                                       DimensionSpec("day", "static", keys=days)]),
        definition("grid_total", inputs=[InputSpec("rows", "p.py:grid", "collect")]),
    ]


def test_reordered_static_keys_change_no_collect_readers_run_hash():
    """collect() hands its list sorted by key label, so the declared order is not an input."""
    first = plan_all(collect_pipeline(("emea", "amer", "apac"), ("2", "10", "1")))
    plans = plan_all(collect_pipeline(("apac", "emea", "amer"), ("1", "2", "10")),
                     recorded(first))

    for reader in ("p.py:total", "p.py:grid_total"):
        assert hashes_of(plans[reader]) == hashes_of(first[reader]), reader
        assert running(plans[reader]) == {}, reader
    assert running(plans["p.py:daily"]) == {} and running(plans["p.py:grid"]) == {}
    # ...and a key added still reruns the reader
    more = plan_all(collect_pipeline(("apac", "emea", "amer", "afr"), ("1", "2", "10")),
                    recorded(first))
    assert running(more["p.py:total"]) == {"": Reason("changed", ("input p.py:daily",))}
    # keys declared in label order hash as they always did: no reader reruns on upgrade
    definitions = collect_pipeline(("amer", "apac", "emea"), ("1", "10", "2"))
    in_order = plan_all(definitions)
    daily = in_order["p.py:daily"]
    assert in_order["p.py:total"].context == context_digest(
        definitions[1].definition_hash,
        {"input p.py:daily": column_digest(daily.keys, daily.run_hashes)})


def test_planning_does_not_mutate_the_stored_state():
    first = plan_all(PIPELINE, known=versions_seen({"r1": 1, "r2": 2}))
    states = recorded(first)
    snapshot = {n: stored(s) for n, s in states.items()}
    plan_all(pipeline(fetch_code="def fetch(): return 9"), states,
             versions_seen({"r1": 1, "r2": 20, "r3": 3}))

    assert {n: stored(s) for n, s in states.items()} == snapshot


def test_graph_is_a_plain_input_and_plan_nodes_plans_only_the_given_order():
    graph: Graph = build_graph(PIPELINE)
    plans = plan_nodes(graph, [VERSIONS], {}, {}, PlanOptions(), {}, {})

    assert list(plans) == [VERSIONS]
    more = plan_nodes(graph, [FETCH], {}, versions_seen({"r1": 1}), PlanOptions(), {}, {},
                      prior=plans)
    assert list(more) == [VERSIONS, FETCH]
    assert more[VERSIONS] is plans[VERSIONS]
