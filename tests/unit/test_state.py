"""Stored per-key state (barca.state): packed columns aligned by index, one NodeState per node.

store/ assembles a state key by key with `StateBuilder.put`, adds successes with
`with_records`, writes it as `encode_header` and `state_columns` and reads it back with `decode_state`; the
planner only reads it. These tests pin that a key is found wherever it sits, that recording
a key twice keeps one row, that a success clears the key's failure, and that a state survives
its stored encoding unchanged.
"""

from __future__ import annotations

import orjson
import pytest

from barca.packed_columns import CHUNK, HashColumn, JsonColumn
from barca.planner.hashes import digest
from barca.planner.model import NodePlan
from barca.state import EMPTY_STATE, NodeState, StateBuilder, ran_entry, state_after_run
from barca.store.state_codec import decode_state, encode_header, state_columns


def stored(state: NodeState) -> tuple[bytes, dict[str, tuple[bytes, ...]]]:
    """A state as store/ writes it: its header and every chunk of its columns."""
    return encode_header(state), {n: tuple(c) for n, c in state_columns(state).items()}


def h(name: str) -> str:
    """A run, context or output hash literal (hashes are fixed-width hex)."""
    return digest(name)


def records(state: NodeState) -> list[tuple]:
    """Every position as (key, run_hash, context, signature, fmt, output_hash)."""
    return [state.record(i) for i in range(len(state))]


def two_keys() -> NodeState:
    builder = StateBuilder()
    builder.put("r1", h("run r1"), h("ctx a"), [h("up r1"), 1], "json", h("out r1"))
    builder.put("r2", h("run r2"), h("ctx a"), [h("up r2"), {"v": 2}], "json", h("out r2"))
    return builder.build({h("ctx a"): {"code": "c1"}}, {})


# --- reading ---------------------------------------------------------------------------------

def test_literal_state_answers_per_position_from_its_columns():
    state = NodeState(keys=JsonColumn(["r1", "r2", "r3"]),
                      run_hash=HashColumn([h("1"), h("2"), h("3")]),
                      context=[0, 1, 0], contexts=[h("ctx a"), h("ctx b")],
                      signature=(JsonColumn([10, 20, 30]),), fmt=["json", "parquet", "json"],
                      output_hash=None)

    assert len(state) == 3
    assert [state.find(k) for k in ("r1", "r2", "r3", "nope", "")] == [0, 1, 2, None, None]
    assert [state.context_at(i) for i in range(3)] == [h("ctx a"), h("ctx b"), h("ctx a")]
    assert state.uniform_context() is None
    assert [state.fmt_at(i) for i in range(3)] == ["json", "parquet", "json"]
    assert state.signature_at(1) == [20]
    assert state.output_hash_at(1) is None
    assert state.record(2) == ("r3", h("3"), h("ctx a"), [30], "json", None, None)


def test_one_shared_context_and_format_are_stored_once():
    state = two_keys()

    assert (state.context, state.contexts, state.fmt) == (0, [h("ctx a")], "json")
    assert state.uniform_context() == h("ctx a")
    assert state.context_at(1) == h("ctx a") and state.fmt_at(1) == "json"


def test_empty_state_finds_nothing_and_has_no_uniform_context():
    state = NodeState()
    assert (len(state), state.find(""), state.find("r1"), state.uniform_context()) == \
        (0, None, None, None)


def test_find_stays_right_after_building_the_key_index():
    builder = StateBuilder()
    for i in range(50):
        builder.put(f"k{i}", h(f"run {i}"), h("ctx"), [i], "json", None)
    state = builder.build({}, {})
    state.keys.indexed()

    assert [state.find(f"k{i}") for i in range(50)] == list(range(50))
    assert state.find("missing") is None


# --- building ------------------------------------------------------------------------------

def test_builder_puts_each_key_in_first_seen_order_with_all_its_columns():
    state = two_keys()

    assert records(state) == [
        ("r1", h("run r1"), h("ctx a"), [h("up r1"), 1], "json", h("out r1"), None),
        ("r2", h("run r2"), h("ctx a"), [h("up r2"), {"v": 2}], "json", h("out r2"), None),
    ]
    # a slot of run hashes is kept as a HashColumn, a slot of values as a JsonColumn
    assert [type(c) for c in state.signature] == [HashColumn, JsonColumn]


@pytest.mark.parametrize("value", ["A" * 32, "g" * 32, "0a 0b 0c 0d 0e 0f 1a 1b 1c 1d 1e"])
def test_values_that_only_look_like_digests_keep_their_exact_text(value):
    """Digests are packed as bytes (lowercase hex when read back): a value column of 32-char
    text that is not lowercase hex stays JSON, so a value never changes case or spacing."""
    builder = StateBuilder()
    builder.put("r1", h("run"), h("ctx"), [value], "json", None)
    builder.put("r2", h("run 2"), h("ctx"), [h("digest")], "json", None)
    state = decode_state(*stored(builder.build({}, {})))
    assert [type(c) for c in state.signature] == [JsonColumn]
    assert state.signature_at(0) == [value]


def test_put_on_an_existing_key_updates_its_row_in_place():
    builder = StateBuilder.from_state(two_keys())
    builder.put("r1", h("run r1 new"), h("ctx b"), [h("up r1 new"), 10], "parquet", h("o"))
    state = builder.build({}, {})

    assert list(state.keys) == ["r1", "r2"]
    assert state.find("r1") == 0
    assert state.record(0) == ("r1", h("run r1 new"), h("ctx b"), [h("up r1 new"), 10],
                               "parquet", h("o"), None)
    assert state.record(1)[:2] == ("r2", h("run r2"))
    assert state.contexts == [h("ctx b"), h("ctx a")]
    assert state.fmt == ["parquet", "json"]


def test_output_hashes_are_kept_only_when_every_key_has_one():
    builder = StateBuilder.from_state(two_keys())
    assert builder.build({}, {}).output_hash == HashColumn([h("out r1"), h("out r2")])
    builder.put("r3", h("run r3"), h("ctx a"), [h("up r3"), 3], "json", None)
    assert builder.build({}, {}).output_hash is None


def test_build_keeps_parts_only_for_contexts_still_in_use():
    builder = StateBuilder.from_state(two_keys())
    state = builder.build({h("ctx a"): {"code": "c1"}, h("ctx gone"): {"code": "c0"}}, {})
    assert state.parts == {h("ctx a"): {"code": "c1"}}


def test_success_under_the_failed_run_hash_clears_the_failure_and_only_that_one():
    state = two_keys()
    failed = {"r1": [h("run r1 next"), "ValueError: boom"], "r2": [h("run r2 next"), "boom"]}
    state = NodeState(state.keys, state.run_hash, state.context, state.contexts,
                      state.signature, state.fmt, state.output_hash, state.parts, failed)

    after = state.with_records([("r1", h("run r1 next"), h("ctx a"), [h("up"), 1], "json",
                                 h("out"))])

    assert after.failed == {"r2": [h("run r2 next"), "boom"]}


def test_failure_of_a_key_without_success_is_kept_beside_the_columns():
    builder = StateBuilder.from_state(two_keys())
    state = builder.build({}, {"r9": [h("run r9"), "boom"]})

    assert state.failed == {"r9": [h("run r9"), "boom"]}
    assert state.find("r9") is None
    assert len(state) == 2


def test_with_records_returns_a_copy_and_leaves_the_original_alone():
    state = two_keys()
    before = stored(state)

    copy = state.with_records([
        ("r2", h("run r2 new"), h("ctx c"), [h("up r2 new"), 20], "json", h("out r2 new")),
        ("r3", h("run r3"), h("ctx a"), [h("up r3"), 3], "json", h("out r3")),
    ])

    assert stored(state) == before
    assert list(copy.keys) == ["r1", "r2", "r3"]
    assert list(copy.run_hash) == [h("run r1"), h("run r2 new"), h("run r3")]
    assert [copy.context_at(i) for i in range(3)] == [h("ctx a"), h("ctx c"), h("ctx a")]
    assert copy.parts == {h("ctx a"): {"code": "c1"}}


# --- the stored encoding -------------------------------------------------------------------

@pytest.mark.parametrize("fmt_r2, out_r2", [("json", h("out r2")), ("parquet", None)],
                         ids=["uniform", "mixed"])
def test_encode_decode_round_trips_every_column(fmt_r2, out_r2):
    builder = StateBuilder()
    builder.put("r1", h("run r1"), h("ctx a"), [h("up r1"), {"b": 1, "a": [1, 2]}], "json",
                h("out r1"))
    builder.put("r/2 é", h("run r2"), h("ctx b"), [h("up r2"), None], fmt_r2, out_r2)
    state = builder.build({h("ctx a"): {"code": "c"}, h("ctx b"): {"code": "d"}},
                          {"r9": [h("run r9"), "ValueError: boom"]})

    again = decode_state(*stored(state))

    assert records(again) == records(state)
    assert (again.context, again.contexts, again.fmt, again.parts, again.failed) == \
        (state.context, state.contexts, state.fmt, state.parts, state.failed)
    assert [type(c) for c in again.signature] == [type(c) for c in state.signature]
    assert again.output_hash == state.output_hash
    assert [again.find(k) for k in ("r1", "r/2 é", "r9")] == [0, 1, None]
    assert stored(again) == stored(state)


def test_empty_state_round_trips():
    again = decode_state(*stored(NodeState()))
    assert (len(again), records(again), again.failed, again.parts) == (0, [], {}, {})


def test_a_state_of_many_chunks_round_trips_and_one_changed_key_changes_one_chunk():
    n = CHUNK * 2 + 5
    builder = StateBuilder()
    for i in range(n):
        builder.put(f"k{i:06}", h(f"run {i}"), h("ctx"), [h(f"up {i}"), {"v": i}], "json",
                    h(f"out {i}"))
    state = builder.build({}, {})
    header, columns = stored(state)
    assert {name: len(chunks) for name, chunks in columns.items()} == \
        {"keys": 3, "run_hash": 3, "sig0": 3, "sig1": 3, "output_hash": 3}

    again = decode_state(header, columns)
    assert records(again) == records(state)

    key = f"k{CHUNK + 7:06}"
    changed = again.with_records([(key, h("run new"), h("ctx"), [h("up new"), {"v": -1}],
                                   "json", h("out new"))])
    _, after = stored(changed)
    differ = {name: [c for c, (a, b) in enumerate(zip(chunks, after[name])) if a != b]
              for name, chunks in columns.items()}
    assert differ == {"keys": [], "run_hash": [1], "sig0": [1], "sig1": [1],
                      "output_hash": [1]}
    assert changed.signature[1].differing(again.signature[1]) == [CHUNK + 7]
    assert again.signature[1].differing(changed.signature[1]) == [CHUNK + 7]


def test_hash_columns_differ_exactly_where_digests_differ_in_any_block_of_a_chunk():
    n = CHUNK * 2 + 70
    old = HashColumn([h(f"run {i}") for i in range(n)])
    changed_at = [0, 63, 64, 65, 1000, CHUNK - 1, CHUNK, 2 * CHUNK + 69]
    new = old.replaced({i: h(f"other {i}") for i in changed_at})
    assert new.differing(old) == changed_at
    assert old.differing(new) == changed_at
    assert old.differing(HashColumn([h(f"run {i}") for i in range(n)])) == []


def test_an_ascending_packed_column_finds_a_key_by_bisection_without_unpacking_it_whole():
    keys = [f"k{i:06}" for i in range(CHUNK * 3)]
    packed = JsonColumn(chunks=JsonColumn(keys).chunks, n=len(keys), ascending=True)
    assert [packed.index(keys[i]) for i in (0, 5, CHUNK, len(keys) - 1)] == \
        [0, 5, CHUNK, len(keys) - 1]
    assert (packed.index("k"), packed.index("k999999x"), packed.index("zz"),
            packed.index(7)) == (None, None, None, None)
    assert packed._items is None  # only the chunks it looked in were read
    unsorted = JsonColumn(chunks=JsonColumn(["b", "a"]).chunks, n=2)
    assert (unsorted.index("a"), unsorted.index("c")) == (1, None)


# --- the snapshot after a run --------------------------------------------------------------

def plan_of(keys: list[str], run: tuple[int, ...]) -> NodePlan:
    return NodePlan("p.py:n", "asset", keys=JsonColumn(keys),
                    run_hashes=HashColumn([h(f"new {k}") for k in keys]), context=h("ctx new"),
                    context_parts={"code": "c2"},
                    signatures=(JsonColumn([f"v-{k}" for k in keys]),),
                    signature_labels=("value p.py:src",), run=run, partitioned=True)


def test_complete_run_snapshot_is_the_plans_columns():
    old = two_keys()
    plan = plan_of(["r1", "r2"], (0, 1))
    ran = {"r1": ran_entry(0, "json"), "r2": ran_entry(1, "json")}

    state = state_after_run(plan, old, ran, {}, {}, keep_output_hash=False, whole=True)

    assert records(state) == [("r1", h("new r1"), h("ctx new"), ["v-r1"], "json", None, None),
                              ("r2", h("new r2"), h("ctx new"), ["v-r2"], "json", None, None)]
    assert (state.parts, state.failed) == ({h("ctx new"): {"code": "c2"}}, {})


def test_partial_run_snapshot_keeps_old_keys_and_adds_successes_and_failures():
    old = two_keys()
    plan = plan_of(["r1", "r2", "r3"], (1, 2))
    ran = {"r3": ran_entry(2, "json")}
    failed = {"r2": [h("new r2"), "ValueError: boom"]}

    state = state_after_run(plan, old, ran, {"r3": h("out r3")}, failed, keep_output_hash=True,
                            whole=True)

    assert [state.record(i)[:3] for i in range(len(state))] == [
        ("r1", h("run r1"), h("ctx a")), ("r2", h("run r2"), h("ctx a")),
        ("r3", h("new r3"), h("ctx new"))]
    assert state.failed == {"r2": [h("new r2"), "ValueError: boom"]}
    assert state.parts[h("ctx new")] == {"code": "c2"}


def test_a_run_where_every_key_failed_leaves_the_old_state_and_the_empty_state_alone():
    plan = plan_of(["r1", "r2"], (0, 1))
    failed = {"r1": [h("new r1"), "boom"], "r2": [h("new r2"), "boom"]}
    for old in (two_keys(), EMPTY_STATE):
        before = stored(old)
        state = state_after_run(plan, old, {}, {}, failed, keep_output_hash=False, whole=True)
        assert state.failed == failed and state is not old
        assert stored(old) == before
    assert (EMPTY_STATE.failed, EMPTY_STATE.parts) == ({}, {})


# --- where packed results are (store.packs) ------------------------------------------------

def test_a_run_that_packs_its_results_keeps_where_each_is_and_a_tick_replaces_only_its_key():
    plan = plan_of([f"r{i}" for i in range(3 * CHUNK)], tuple(range(3 * CHUNK)))
    ran = {k: ran_entry(i, "json") for i, k in enumerate(plan.keys)}
    packed = {k: f"a.pack@{i * 10}:10" for i, k in enumerate(plan.keys) if i != 5}
    first = state_after_run(plan, EMPTY_STATE, ran, {}, {}, keep_output_hash=False,
                            whole=True, packed=packed)
    assert first.where_at(0) == "a.pack@0:10" and first.where_at(5) is None  # a file of its own
    again = decode_state(*stored(first))
    assert [again.where_at(i) for i in (0, 5, 3 * CHUNK - 1)] == \
        ["a.pack@0:10", None, f"a.pack@{(3 * CHUNK - 1) * 10}:10"]

    tick = plan_of(list(plan.keys), (7,))  # one key reruns, into another pack
    after = state_after_run(tick, again, {"r7": ran_entry(7, "json")}, {}, {},
                            keep_output_hash=False, whole=True, packed={"r7": "b.pack@0:9"})
    assert after.where_at(7) == "b.pack@0:9" and after.where_at(8) == "a.pack@80:10"
    assert after.where.chunks[1:] == again.where.chunks[1:]  # the other chunks as they were


def test_where_follows_its_key_when_the_keys_change_and_an_unpacked_rerun_clears_it():
    old = state_after_run(plan_of(["r1", "r2"], (0, 1)), EMPTY_STATE,
                          {"r1": ran_entry(0, "json"), "r2": ran_entry(1, "json")}, {}, {},
                          keep_output_hash=False, whole=True,
                          packed={"r1": "a.pack@0:4", "r2": "a.pack@4:4"})
    grown = state_after_run(plan_of(["r0", "r1", "r2"], (0, 2)), old,
                            {"r0": ran_entry(0, "json"), "r2": ran_entry(2, "json")}, {}, {},
                            keep_output_hash=False, whole=True, packed={"r0": "b.pack@0:4"})
    assert [grown.where_at(i) for i in range(3)] == ["b.pack@0:4", "a.pack@0:4", None]
    partial = state_after_run(plan_of(["r1", "r2"], (1,)), old, {}, {},
                              {"r2": [h("new r2"), "boom"]}, keep_output_hash=False, whole=True)
    assert [partial.where_at(i) for i in range(2)] == ["a.pack@0:4", "a.pack@4:4"]


def test_a_snapshot_stored_before_packs_reads_as_every_result_a_file_of_its_own():
    header, columns = stored(two_keys())
    old_header = orjson.dumps({k: v for k, v in orjson.loads(header).items() if k != "where"})
    state = decode_state(old_header, columns)
    assert state.where is None and state.where_at(1) is None
