"""`--partition DIM=VALUE[,VALUE]` narrows a run; `--refresh` on a partitioned node reruns keys.

A selected key gets the same run hash and artifact as in a full run, so a later full run
computes only the others. A `collect` fan-in cannot run on part of its keys: it is skipped with
reason `partition_selection`. Naming a dimension or a value that does not exist is exit 2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, take_executed, write

PIPELINE = """
    from barca import asset, collect, partitions, partitions_from

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={"k": partitions(["a", "b", "c", "d"])})
    def load(k: str) -> str:
        _ran("load " + k)
        return "v-" + k

    @asset(partitions={"k": partitions_from(load)})
    def score(k: str, load: str) -> str:
        _ran("score " + k)
        return load + "!"

    @asset(inputs={"all": collect(score)})
    def total(all: list) -> list:
        _ran("total")
        return all

    @asset(partitions={"region": partitions(["emea", "amer"]), "day": partitions(["d1", "d2"])})
    def grid(region: str, day: str) -> str:
        _ran(f"grid {region} {day}")
        return f"{region}/{day}"
"""


@pytest.fixture
def pipeline(project: Path) -> Path:
    return write(project, {"pipeline.py": PIPELINE})


def test_partition_runs_only_the_selected_keys_and_a_full_run_only_the_others(
        pipeline: Path) -> None:
    part = barca(pipeline, "get", "score", "pipeline.py", "--partition", "k=a,c").expect(0)
    assert part.json["final_output"] == {"k=a": "v-a!", "k=c": "v-c!"}
    assert part.steps["score"]["partitions"]["will_run_keys"] == ["k=a", "k=c"]
    assert take_executed(pipeline) == ["load a", "load c", "score a", "score c"]

    full = barca(pipeline, "get", "score", "pipeline.py").expect(0)
    assert full.steps["load"]["partitions"] == {
        "total": 4, "cached": 2, "will_run": 2, "will_run_keys": ["k=b", "k=d"]}
    assert take_executed(pipeline) == ["load b", "load d", "score b", "score d"]
    assert full.json["final_output"] == {"k=a": "v-a!", "k=b": "v-b!", "k=c": "v-c!",
                                         "k=d": "v-d!"}


def test_partition_skips_a_collect_fan_in(pipeline: Path) -> None:
    # every node of the file: total is in the run, not its target (targeting it is exit 2,
    # tests/e2e/test_contract_semantics.py)
    got = barca(pipeline, "get", "pipeline.py", "--partition", "k=b").expect(0)
    assert got.steps["total"]["status"] == "skipped"
    assert got.steps["total"]["reason"] == "partition_selection"
    assert "without --partition" in got.steps["total"]["detail"]
    assert "--partition skips a fan-in that reads every key: total" in got.stderr
    assert take_executed(pipeline) == ["grid amer d1", "grid amer d2", "grid emea d1",
                                       "grid emea d2", "load b", "score b"]

    dry = barca(pipeline, "get", "pipeline.py", "--partition", "k=b",
                "--dry-run").expect(0)
    assert dry.steps["total"]["action"] == "skipped"
    assert dry.steps["total"]["reason"] == "partition_selection"

    full = barca(pipeline, "get", "total", "pipeline.py").expect(0)
    assert full.json["final_output"] == ["v-a!", "v-b!", "v-c!", "v-d!"]
    assert take_executed(pipeline) == ["load a", "load c", "load d",
                                       "score a", "score c", "score d", "total"]


def test_partition_on_several_dimensions_and_the_json_form(pipeline: Path) -> None:
    one = barca(pipeline, "get", "grid", "pipeline.py", "--partition", "region=emea").expect(0)
    assert one.json["final_output"] == {"day=d1,region=emea": "emea/d1",
                                        "day=d2,region=emea": "emea/d2"}
    assert take_executed(pipeline) == ["grid emea d1", "grid emea d2"]
    both = barca(pipeline, "get", "grid", "pipeline.py", "--partition", "region=amer",
                 "--partition", "day=d2").expect(0)
    assert both.json["final_output"] == {"day=d2,region=amer": "amer/d2"}
    as_json = barca(pipeline, "get", "grid", "pipeline.py", "--partition",
                    '{"region": "amer", "day": ["d1", "d2"]}').expect(0)
    assert sorted(as_json.json["final_output"]) == ["day=d1,region=amer", "day=d2,region=amer"]
    assert take_executed(pipeline) == ["grid amer d1", "grid amer d2"]


def test_partition_naming_a_dimension_not_in_the_cone_is_a_usage_error(pipeline: Path) -> None:
    bad = barca(pipeline, "get", "score", "pipeline.py", "--partition", "region=emea").expect(2)
    assert bad.envelope["kind"] == "usage"
    assert "region" in bad.envelope["error"]
    assert "k" in bad.envelope["remediation"]
    assert bad.stdout == ""
    assert take_executed(pipeline) == []


@pytest.mark.parametrize("target, value", [
    ("load", "zz"),
    ("load", "a,zz"),
    ("score", "zz"),
    ("total", "a,zz"),
])
def test_partition_value_matching_no_static_key_is_a_usage_error(pipeline: Path, target: str,
                                                                 value: str) -> None:
    bad = barca(pipeline, "get", target, "pipeline.py", "--partition", f"k={value}").expect(2)
    assert bad.envelope["kind"] == "usage"
    assert "zz" in bad.envelope["error"]
    assert "a, b, c, d" in bad.envelope["remediation"]
    assert take_executed(pipeline) == []


def test_refresh_on_a_partitioned_node_reruns_all_its_keys(pipeline: Path) -> None:
    barca(pipeline, "get", "total", "pipeline.py").expect(0)
    take_executed(pipeline)
    got = barca(pipeline, "get", "total", "pipeline.py", "--refresh", "load").expect(0)
    assert got.steps["load"]["reason"] == "refresh"
    assert got.steps["load"]["partitions"]["will_run"] == 4
    assert got.steps["score"]["reason"] == "refresh_cascade"
    assert got.steps["total"]["reason"] == "refresh_cascade"
    assert take_executed(pipeline) == ["load a", "load b", "load c", "load d",
                                       "score a", "score b", "score c", "score d", "total"]

    only = barca(pipeline, "get", "score", "pipeline.py", "--refresh", "score").expect(0)
    assert only.statuses() == {"load": "cached", "score": "ran"}
    assert take_executed(pipeline) == ["score a", "score b", "score c", "score d"]

    narrowed = barca(pipeline, "get", "score", "pipeline.py", "--refresh", "load",
                     "--partition", "k=b").expect(0)
    assert narrowed.json["steps_executed"] == 2
    assert take_executed(pipeline) == ["load b", "score b"]


KEYED = """
    import json
    from pathlib import Path
    from barca import asset, partitions_from, sensor

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)})
    def cleaned(k: str, versions) -> str:
        with open("executed.log", "a") as fh:
            fh.write("cleaned " + k + "\\n")
        return f"{k}@{versions}"
"""


@pytest.fixture
def keyed(project: Path) -> Path:
    return write(project, {"pipeline.py": KEYED, "versions.json": '{"a": 1, "b": 2, "c": 3}'})


def test_partition_narrows_keys_known_only_after_the_source_ran(keyed: Path) -> None:
    got = barca(keyed, "get", "cleaned", "pipeline.py", "--partition", "k=b").expect(0)
    assert got.json["final_output"] == {"k=b": "b@2"}
    assert take_executed(keyed) == ["cleaned b"]
    full = barca(keyed, "get", "cleaned", "pipeline.py").expect(0)
    assert full.steps["cleaned"]["partitions"]["will_run_keys"] == ["k=a", "k=c"]
    assert take_executed(keyed) == ["cleaned a", "cleaned c"]


def test_partition_value_absent_from_a_dynamic_source_computes_nothing(keyed: Path) -> None:
    got = barca(keyed, "get", "cleaned", "pipeline.py", "--partition", "k=zz").expect(0)
    assert got.json["final_output"] == {}
    assert take_executed(keyed) == []


def test_partition_value_absent_from_a_dynamic_source_is_warned_about(keyed: Path) -> None:
    got = barca(keyed, "get", "cleaned", "pipeline.py", "--partition", "k=zz").expect(0)
    assert "zz" in got.stderr or any("zz" in w["message"] for w in got.json["warnings"])


def test_get_json_says_what_the_selection_kept_left_out_and_skipped(pipeline: Path) -> None:
    expected = {"selection": {"k": ["b", "c"]},
                "nodes": [{"id": "pipeline.py:load", "selected": 2, "skipped": 2},
                          {"id": "pipeline.py:score", "selected": 2, "skipped": 2}],
                "skipped_nodes": ["pipeline.py:total"]}
    dry = barca(pipeline, "get", "pipeline.py", "--partition", "k=c,b", "--dry-run")
    assert dry.expect(0).json["partition_selection"] == expected
    got = barca(pipeline, "get", "pipeline.py", "--partition", "k=c,b").expect(0)
    assert got.json["partition_selection"] == expected
    assert "partition_selection" not in barca(pipeline, "get", "score", "pipeline.py").json


def test_selection_counts_are_null_while_a_nodes_keys_are_unknown(project: Path) -> None:
    write(project, {"pipeline.py": """
        from barca import asset, partitions_from

        @asset()
        def ids() -> list:
            return ["x", "y", "z"]

        @asset(partitions={"id": partitions_from(ids)})
        def per(id: str) -> str:
            return id * 2
    """})
    dry = barca(project, "get", "per", "pipeline.py", "--partition", "id=y", "--dry-run")
    assert dry.expect(0).json["partition_selection"]["nodes"] == [
        {"id": "pipeline.py:per", "selected": None, "skipped": None}]
    got = barca(project, "get", "per", "pipeline.py", "--partition", "id=y").expect(0)
    assert got.json["partition_selection"]["nodes"] == [
        {"id": "pipeline.py:per", "selected": 1, "skipped": 2}]
    assert got.json["final_output"] == {"id=y": "yy"}
