"""Caching stays per key under batch= (issue 14; `barca docs batch`), at the driver level
(moved from tests/e2e/test_batch_caching.py, which keeps stale keys under `--batch none` and
`barca.get(..., batch=)` from Python against real workers).

Covered here: the grouping is in no hash, so a key computed in a call of every key is a cache
hit for any other grouping, and projects run with different groupings record the same run
hashes and artifact bytes; changing a function to the batch form is a code change; a
`--batch` override alone runs no step, with `--refresh` it regroups; a keyed source that
shrinks keeps a `collect(...)` reader exact; cutoff=True on a batched node hashes each key's
bytes; a failed key blocks only its own key in a batched reader.

Every batch function appends `[node, keys]` to calls.log, so the tests see which calls
really ran.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import barca_here, result_bytes, take_calls, write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)
from rule_pipelines.batch_cache import EXPECTED, PIPELINE, RETAILERS, setup


def full_run(engine: Engine) -> dict:
    got = engine.get("scored", "pipeline.py").expect(0)
    assert take_calls(engine.root) == {"orders": [RETAILERS], "scored": [RETAILERS]}
    return got.json


def keys_of(root: Path, run_id: str) -> dict[tuple[str, str], dict]:
    steps = barca_here(root, "history", run_id, "--json").expect(0).json["steps"]
    return {(s["node_id"].split(":")[1], s["partition_key"]): s for s in steps}


def status_node(root: Path, name: str) -> dict:
    status = barca_here(root, "status", "--json", "pipeline.py").expect(0).json
    return next(n for n in status["nodes"] if n["name"] == name)


def test_keys_computed_in_one_call_are_cache_hits_for_any_other_grouping(
        engine: Engine) -> None:
    setup(engine.root)
    full_run(engine)
    for override in (("none",), ("3",), ("scored=1",), ("all",)):
        again = engine.get("scored", "pipeline.py", batch=override).expect(0)
        assert take_calls(engine.root) == {}, override
        assert again.json["steps_executed"] == 1, override  # the sensor only
        assert again.executors == 1, override  # the sensor's
        assert again.statuses() == {"versions": "ran", "orders": "cached",
                                    "scored": "cached"}, override
        assert again.json["final_output"] == EXPECTED

    scored = status_node(engine.root, "scored")
    assert scored["partitions"]["total"] == 5 and scored["partitions"]["cached"] == 5


def test_the_grouping_changes_no_run_hash_and_no_artifact(engine: Engine) -> None:
    runs = {}
    for name, batch in (("all", None), ("none", ("none",)), ("two", ("2",))):
        root = engine.root / name
        root.mkdir()
        write(root, {"barca.toml": ""})
        setup(root)
        got = Engine(root).get("scored", "pipeline.py", batch=batch).expect(0)
        runs[name] = {key: (s["run_hash"], result_bytes(root, s["artifact_path"])
                            if s["artifact_path"] else None)
                      for key, s in keys_of(root, got.json["run_id"]).items()}
        calls = take_calls(root)
        assert len(calls["scored"]) == {"all": 1, "none": 5, "two": 3}[name], calls
    assert len(runs["all"]) == 11
    assert runs["none"] == runs["all"] and runs["two"] == runs["all"]


def test_changing_a_function_to_the_batch_form_runs_its_keys_once_more(
        engine: Engine) -> None:
    setup(engine.root)
    single = PIPELINE.replace(
        """@asset(partitions={"retailer": partitions_from(orders)}, batch="all")
    def scored(retailer: list[str], orders: dict[str, dict]) -> dict:
        _call("scored", retailer)
        return {r: orders[r]["v"] * 10 for r in retailer}""",
        """@asset(partitions={"retailer": partitions_from(orders)})
    def scored(retailer: str, orders: dict) -> int:
        _call("scored", [retailer])
        return orders["v"] * 10""")
    assert single != PIPELINE
    write(engine.root, {"pipeline.py": single})
    engine.get("scored", "pipeline.py").expect(0)
    assert take_calls(engine.root)["scored"] == [[r] for r in RETAILERS]

    write(engine.root, {"pipeline.py": PIPELINE})   # the batch form: a code change
    got = engine.get("scored", "pipeline.py").expect(0)
    assert take_calls(engine.root) == {"scored": [RETAILERS]}  # orders stayed cached
    assert got.json["final_output"] == EXPECTED


def test_batch_override_alone_recomputes_nothing_but_with_refresh_regroups(
        engine: Engine) -> None:
    root = engine.root
    setup(root)
    full_run(engine)
    alone = engine.get("scored", "pipeline.py", batch=("scored=all",)).expect(0)
    assert take_calls(root) == {}
    assert alone.json["steps_executed"] == 1  # the sensor

    refreshed = engine.get("scored", "pipeline.py", refresh="scored",
                           batch=("scored=2",)).expect(0)
    assert take_calls(root) == {"scored": [["r1", "r2"], ["r3", "r4"], ["r5"]]}
    assert refreshed.json["steps_executed"] == 1 + 5

    one_call = engine.get("scored", "pipeline.py", refresh="scored",
                          batch=("scored=all",)).expect(0)
    assert take_calls(root) == {"scored": [RETAILERS]}   # every key, one call
    assert one_call.json["final_output"] == EXPECTED

    declared = engine.get("scored", "pipeline.py", refresh="scored").expect(0)
    assert take_calls(root) == {"scored": [RETAILERS]}   # batch="all" as declared
    assert declared.json["steps_executed"] == 1 + 5


def test_a_shrinking_keyed_source_keeps_a_collect_reader_exact(engine: Engine) -> None:
    root = engine.root
    setup(root)
    got = engine.get("total", "pipeline.py").expect(0)
    assert got.json["final_output"] == [10, 20, 30, 40, 50]
    take_calls(root)

    (root / "versions.json").write_text(json.dumps({"r1": 1, "r3": 3, "r4": 4}))
    got = engine.get("total", "pipeline.py").expect(0)
    assert got.json["final_output"] == [10, 30, 40]
    assert take_calls(root) == {"total": [[]]}  # no key of orders or scored ran

    (root / "versions.json").write_text(json.dumps({"r3": 33}))  # shrinks and changes
    got = engine.get("total", "pipeline.py").expect(0)
    assert got.json["final_output"] == [330]
    assert take_calls(root) == {"orders": [["r3"]], "scored": [["r3"]], "total": [[]]}

    scored = status_node(root, "scored")
    assert scored["partitions"]["total"] == 1 and scored["partitions"]["cached"] == 1


CUTOFF = """
    import json
    from pathlib import Path
    from barca import Failed, asset, partitions_from, sensor

    def _call(node, keys):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps([node, keys]) + "\\n")

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)}, batch="all", cutoff=True)
    def parity(k: list[str], versions: dict) -> dict:
        _call("parity", k)
        return {key: Failed("negative") if versions[key] < 0 else
                ("even" if versions[key] % 2 == 0 else "odd") for key in k}

    @asset(partitions={"k": partitions_from(parity)}, batch="all")
    def report(k: list[str], parity: dict[str, str]) -> dict:
        _call("report", k)
        return {key: key + " is " + parity[key] for key in k}
"""


def test_cutoff_hashes_each_keys_bytes_in_a_batched_node(engine: Engine) -> None:
    root = engine.root
    write(root, {"pipeline.py": CUTOFF, "versions.json": '{"a": 1, "b": 2, "c": 3}'})
    engine.get("report", "pipeline.py").expect(0)
    take_calls(root)

    (root / "versions.json").write_text('{"a": 5, "b": 2, "c": 4}')  # a: same bytes
    got = engine.get("report", "pipeline.py").expect(0)
    assert take_calls(root) == {"parity": [["a", "c"]], "report": [["c"]]}
    assert got.json["final_output"] == {"k=a": "a is odd", "k=b": "b is even",
                                        "k=c": "c is even"}


# without cutoff: a failed key of a cutoff=True node skips its whole reader, batched or not
BLOCKING = CUTOFF.replace(', cutoff=True', '')


def test_a_failed_key_blocks_only_its_own_key_below(engine: Engine) -> None:
    root = engine.root
    assert BLOCKING != CUTOFF
    write(root, {"pipeline.py": BLOCKING, "versions.json": '{"a": 1, "b": -2, "c": 3}'})
    got = engine.get("report", "pipeline.py").expect(1)
    assert take_calls(root) == {"parity": [["a", "b", "c"]], "report": [["a", "c"]]}
    assert got.statuses()["report"] == "partial"
    good = engine.get("report", "pipeline.py", partition=("k=a,c",)).expect(0)
    assert take_calls(root) == {}   # the good keys of both nodes are cached
    assert good.json["final_output"] == {"k=a": "a is odd", "k=c": "c is odd"}
    assert status_node(root, "parity")["partitions"]["failed_keys"] == ["k=b"]
    assert status_node(root, "report")["partitions"]["blocked_keys"] == ["k=b"]

    (root / "versions.json").write_text('{"a": 1, "b": 2, "c": 3}')
    fixed = engine.get("report", "pipeline.py").expect(0)
    assert take_calls(root) == {"parity": [["b"]], "report": [["b"]]}
    assert fixed.json["final_output"]["k=b"] == "b is even"
