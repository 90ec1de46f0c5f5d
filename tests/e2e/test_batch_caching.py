"""Caching stays per key under batch= (issue 14; `barca docs batch`, "What stays the same" and
"Overrides for one run").

Covered: the grouping is in no hash, so a key computed in a call of every key is a cache hit
for `--batch none` and `--batch 3`, and two projects run with different groupings record the
same run hashes and artifact bytes; changing a function to the batch form is a code change
(its keys run once more); `--batch scored=all` alone after a full run runs no step, while
`--refresh scored --batch scored=all` runs every key of scored in one call (and `--refresh
scored` alone groups by the declared batch=); a few stale keys under `--batch none` run one
call each; `barca.get(..., batch="all")` and `batch={"scored": 2}` from Python group the same
way as the CLI, and naming a node without batch= raises a UsageError; a keyed source that
shrinks twice keeps a `collect(...)` reader of the batched node exactly at the current keys;
cutoff=True on a batched node hashes each key's bytes (a key whose bytes did not change does
not rerun its reader's key); a failed key blocks only its own key in a batched reader.

Every batch function appends `[node, keys]` to calls.log, so the tests see which calls
really ran.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import barca, drive, take_calls, write

PIPELINE = """
    import json
    from pathlib import Path
    from barca import asset, collect, partitions_from, sensor

    def _call(node, keys):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps([node, keys]) + "\\n")

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"retailer": partitions_from(versions)}, batch="all")
    def orders(retailer: list[str], versions: dict) -> dict:
        _call("orders", retailer)
        return {r: {"retailer": r, "v": versions[r]} for r in retailer}

    @asset(partitions={"retailer": partitions_from(orders)}, batch="all")
    def scored(retailer: list[str], orders: dict[str, dict]) -> dict:
        _call("scored", retailer)
        return {r: orders[r]["v"] * 10 for r in retailer}

    @asset(inputs={"xs": collect(scored)})
    def total(xs: list) -> list:
        _call("total", [])
        return xs
"""

RETAILERS = ["r1", "r2", "r3", "r4", "r5"]
VERSIONS = {r: i + 1 for i, r in enumerate(RETAILERS)}


def setup(root: Path, versions: dict | None = None) -> Path:
    write(root, {"pipeline.py": PIPELINE})
    (root / "versions.json").write_text(json.dumps(versions or VERSIONS))
    return root


def full_run(root: Path) -> dict:
    got = barca(root, "get", "scored", "pipeline.py").expect(0)
    assert take_calls(root) == {"orders": [RETAILERS], "scored": [RETAILERS]}
    return got.json


def keys_of(root: Path, run_id: str) -> dict[tuple[str, str], dict]:
    steps = barca(root, "history", run_id, "--json").expect(0).json["steps"]
    return {(s["node_id"].split(":")[1], s["partition_key"]): s for s in steps}


EXPECTED = {f"retailer={r}": v * 10 for r, v in VERSIONS.items()}


def test_keys_computed_in_one_call_are_cache_hits_for_any_other_grouping(project: Path) -> None:
    setup(project)
    full_run(project)
    for override in (["--batch", "none"], ["--batch", "3"], ["--batch", "scored=1"],
                     ["--batch", "all"]):
        again = barca(project, "get", "scored", "pipeline.py", *override).expect(0)
        assert take_calls(project) == {}, override
        assert again.json["steps_executed"] == 1, override  # the sensor only
        assert again.statuses() == {"versions": "ran", "orders": "cached",
                                    "scored": "cached"}, override
        assert again.json["final_output"] == EXPECTED

    status = barca(project, "status", "--json", "pipeline.py").expect(0).json
    scored = next(n for n in status["nodes"] if n["name"] == "scored")
    assert scored["partitions"]["total"] == 5 and scored["partitions"]["cached"] == 5


def test_the_grouping_changes_no_run_hash_and_no_artifact(tmp_path: Path) -> None:
    runs = {}
    for name, args in (("all", []), ("none", ["--batch", "none"]), ("two", ["--batch", "2"])):
        root = tmp_path / name
        root.mkdir()
        write(root, {"barca.toml": ""})
        setup(root)
        got = barca(root, "get", "scored", "pipeline.py", *args).expect(0)
        runs[name] = {key: (s["run_hash"], (root / s["artifact_path"]).read_bytes()
                            if s["artifact_path"] else None)
                      for key, s in keys_of(root, got.json["run_id"]).items()}
        calls = take_calls(root)
        assert len(calls["scored"]) == {"all": 1, "none": 5, "two": 3}[name], calls
    assert len(runs["all"]) == 11
    assert runs["none"] == runs["all"] and runs["two"] == runs["all"]


def test_changing_a_function_to_the_batch_form_runs_its_keys_once_more(project: Path) -> None:
    setup(project)
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
    write(project, {"pipeline.py": single})
    barca(project, "get", "scored", "pipeline.py").expect(0)
    assert take_calls(project)["scored"] == [[r] for r in RETAILERS]

    write(project, {"pipeline.py": PIPELINE})   # the batch form: a code change
    got = barca(project, "get", "scored", "pipeline.py").expect(0)
    assert take_calls(project) == {"scored": [RETAILERS]}  # orders stayed cached
    assert got.json["final_output"] == EXPECTED


def test_batch_override_alone_recomputes_nothing_but_with_refresh_regroups(
        project: Path) -> None:
    setup(project)
    full_run(project)
    alone = barca(project, "get", "scored", "pipeline.py", "--batch", "scored=all").expect(0)
    assert take_calls(project) == {}
    assert alone.json["steps_executed"] == 1  # the sensor

    refreshed = barca(project, "get", "scored", "pipeline.py", "--refresh", "scored",
                      "--batch", "scored=2").expect(0)
    assert take_calls(project) == {"scored": [["r1", "r2"], ["r3", "r4"], ["r5"]]}
    assert refreshed.json["steps_executed"] == 1 + 5

    one_call = barca(project, "get", "scored", "pipeline.py", "--refresh", "scored",
                     "--batch", "scored=all").expect(0)
    assert take_calls(project) == {"scored": [RETAILERS]}   # every key, one call
    assert one_call.json["final_output"] == EXPECTED

    declared = barca(project, "get", "scored", "pipeline.py", "--refresh", "scored").expect(0)
    assert take_calls(project) == {"scored": [RETAILERS]}   # batch="all" as declared
    assert declared.json["steps_executed"] == 1 + 5


def test_stale_keys_under_batch_none_run_one_call_each(project: Path) -> None:
    setup(project)
    full_run(project)
    (project / "versions.json").write_text(json.dumps({**VERSIONS, "r2": 20, "r4": 40}))
    got = barca(project, "get", "scored", "pipeline.py", "--batch", "none").expect(0)
    assert take_calls(project) == {"orders": [["r2"], ["r4"]], "scored": [["r2"], ["r4"]]}
    assert got.json["final_output"] == {**EXPECTED, "retailer=r2": 200, "retailer=r4": 400}


def test_barca_get_from_python_takes_batch_like_the_cli(project: Path) -> None:
    setup(project)
    out = drive(project, """
import json, barca
value = barca.get("scored", "pipeline.py", batch={"scored": 2, "orders": "none"})
print(json.dumps(value))
""")
    assert out == EXPECTED
    assert take_calls(project) == {"orders": [[r] for r in RETAILERS],
                                   "scored": [["r1", "r2"], ["r3", "r4"], ["r5"]]}

    (project / "versions.json").write_text(json.dumps({**VERSIONS, "r1": 7, "r5": 9}))
    out = drive(project, """
import json, barca
value = barca.get("scored", "pipeline.py", batch="all")
try:
    barca.get("scored", "pipeline.py", batch={"versions": 2})
    refused = None
except barca.UsageError as exc:
    refused = [str(exc), exc.exit_code]
print(json.dumps({"value": value, "refused": refused}))
""")
    assert out["value"] == {**EXPECTED, "retailer=r1": 70, "retailer=r5": 90}
    assert take_calls(project) == {"orders": [["r1", "r5"]], "scored": [["r1", "r5"]]}
    assert out["refused"] is not None and out["refused"][1] == 2
    assert "pipeline.py:versions" in out["refused"][0]


def test_a_shrinking_keyed_source_keeps_a_collect_reader_exact(project: Path) -> None:
    setup(project)
    got = barca(project, "get", "total", "pipeline.py").expect(0)
    assert got.json["final_output"] == [10, 20, 30, 40, 50]
    take_calls(project)

    (project / "versions.json").write_text(json.dumps({"r1": 1, "r3": 3, "r4": 4}))
    got = barca(project, "get", "total", "pipeline.py").expect(0)
    assert got.json["final_output"] == [10, 30, 40]
    assert take_calls(project) == {"total": [[]]}  # no key of orders or scored ran

    (project / "versions.json").write_text(json.dumps({"r3": 33}))  # shrinks and changes
    got = barca(project, "get", "total", "pipeline.py").expect(0)
    assert got.json["final_output"] == [330]
    assert take_calls(project) == {"orders": [["r3"]], "scored": [["r3"]], "total": [[]]}

    status = barca(project, "status", "--json", "pipeline.py").expect(0).json
    scored = next(n for n in status["nodes"] if n["name"] == "scored")
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


def test_cutoff_hashes_each_keys_bytes_in_a_batched_node(project: Path) -> None:
    write(project, {"pipeline.py": CUTOFF, "versions.json": '{"a": 1, "b": 2, "c": 3}'})
    barca(project, "get", "report", "pipeline.py").expect(0)
    take_calls(project)

    (project / "versions.json").write_text('{"a": 5, "b": 2, "c": 4}')  # a: same bytes
    got = barca(project, "get", "report", "pipeline.py").expect(0)
    assert take_calls(project) == {"parity": [["a", "c"]], "report": [["c"]]}
    assert got.json["final_output"] == {"k=a": "a is odd", "k=b": "b is even",
                                        "k=c": "c is even"}


# without cutoff: a failed key of a cutoff=True node skips its whole reader, batched or not
BLOCKING = CUTOFF.replace(', cutoff=True', '')


def test_a_failed_key_blocks_only_its_own_key_below(project: Path) -> None:
    assert BLOCKING != CUTOFF
    write(project, {"pipeline.py": BLOCKING, "versions.json": '{"a": 1, "b": -2, "c": 3}'})
    got = barca(project, "get", "report", "pipeline.py").expect(1)
    assert take_calls(project) == {"parity": [["a", "b", "c"]], "report": [["a", "c"]]}
    assert got.statuses()["report"] == "partial"
    good = barca(project, "get", "report", "pipeline.py", "--partition", "k=a,c").expect(0)
    assert take_calls(project) == {}   # the good keys of both nodes are cached
    assert good.json["final_output"] == {"k=a": "a is odd", "k=c": "c is odd"}
    status = barca(project, "status", "--json", "pipeline.py").expect(0).json
    nodes = {n["name"]: n for n in status["nodes"]}
    assert nodes["parity"]["partitions"]["failed_keys"] == ["k=b"]
    assert nodes["report"]["partitions"]["blocked_keys"] == ["k=b"]

    (project / "versions.json").write_text('{"a": 1, "b": 2, "c": 3}')
    fixed = barca(project, "get", "report", "pipeline.py").expect(0)
    assert take_calls(project) == {"parity": [["b"]], "report": [["b"]]}
    assert fixed.json["final_output"]["k=b"] == "b is even"
