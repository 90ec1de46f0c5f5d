"""`--partition DIM=VALUE[,VALUE]`, `--refresh` on a partitioned node, and failed keys, at the
driver level (moved from tests/e2e/test_partitions_selection.py and
tests/e2e/test_partitions_failed_keys.py, which keep a narrowed run and a run with failed keys
against real workers).

A selected key gets the same run hash and artifact as in a full run, so a later full run
computes only the others. A `collect` fan-in cannot run on part of its keys: it is skipped
with reason `partition_selection`. Naming a dimension or a value that does not exist is a
usage error. A failed key lets its siblings finish; the next run runs only what failed, and
a reader that reads failed keys key-for-key is blocked for those keys only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from barca.errors import UsageError
from conftest import barca_here, take_executed, write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)
from rule_pipelines.partition_selection import FAILING, PIPELINE


@pytest.fixture
def pipeline(engine: Engine) -> Engine:
    write(engine.root, {"pipeline.py": PIPELINE})
    return engine


def test_partition_skips_a_collect_fan_in(pipeline: Engine) -> None:
    root = pipeline.root
    # every node of the file: total is in the run, not its target (targeting it is refused,
    # tests/engine/test_semantics_rules.py)
    got = pipeline.get(None, "pipeline.py", partition=("k=b",)).expect(0)
    assert got.steps["total"]["status"] == "skipped"
    assert got.steps["total"]["reason"] == "partition_selection"
    assert "without --partition" in got.steps["total"]["detail"]
    assert "--partition skips a fan-in that reads every key: total" in got.stderr
    assert take_executed(root) == ["grid amer d1", "grid amer d2", "grid emea d1",
                                   "grid emea d2", "load b", "score b"]

    dry = pipeline.get(None, "pipeline.py", partition=("k=b",), dry_run=True)
    assert dry.steps["total"]["action"] == "skipped"
    assert dry.steps["total"]["reason"] == "partition_selection"

    full = pipeline.get("total", "pipeline.py").expect(0)
    assert full.json["final_output"] == ["v-a!", "v-b!", "v-c!", "v-d!"]
    assert take_executed(root) == ["load a", "load c", "load d",
                                   "score a", "score c", "score d", "total"]


def test_partition_on_several_dimensions_and_the_json_form(pipeline: Engine) -> None:
    root = pipeline.root
    one = pipeline.get("grid", "pipeline.py", partition=("region=emea",)).expect(0)
    assert one.json["final_output"] == {"day=d1,region=emea": "emea/d1",
                                        "day=d2,region=emea": "emea/d2"}
    assert take_executed(root) == ["grid emea d1", "grid emea d2"]
    both = pipeline.get("grid", "pipeline.py", partition=("region=amer", "day=d2")).expect(0)
    assert both.json["final_output"] == {"day=d2,region=amer": "amer/d2"}
    as_json = pipeline.get("grid", "pipeline.py",
                           partition=('{"region": "amer", "day": ["d1", "d2"]}',)).expect(0)
    assert sorted(as_json.json["final_output"]) == ["day=d1,region=amer", "day=d2,region=amer"]
    assert take_executed(root) == ["grid amer d1", "grid amer d2"]


def test_partition_naming_a_dimension_not_in_the_cone_is_a_usage_error(
        pipeline: Engine) -> None:
    with pytest.raises(UsageError, match="region") as bad:
        pipeline.get("score", "pipeline.py", partition=("region=emea",))
    assert bad.value.exit_code == 2
    assert "k" in bad.value.remediation
    assert take_executed(pipeline.root) == []


@pytest.mark.parametrize("target, value", [
    ("load", "zz"),
    ("load", "a,zz"),
    ("score", "zz"),
    ("total", "a,zz"),
])
def test_partition_value_matching_no_static_key_is_a_usage_error(pipeline: Engine, target: str,
                                                                 value: str) -> None:
    with pytest.raises(UsageError, match="zz") as bad:
        pipeline.get(target, "pipeline.py", partition=(f"k={value}",))
    assert bad.value.exit_code == 2
    assert "a, b, c, d" in bad.value.remediation
    assert take_executed(pipeline.root) == []


def test_refresh_on_a_partitioned_node_reruns_all_its_keys(pipeline: Engine) -> None:
    root = pipeline.root
    pipeline.get("total", "pipeline.py").expect(0)
    take_executed(root)
    got = pipeline.get("total", "pipeline.py", refresh="load").expect(0)
    assert got.steps["load"]["reason"] == "refresh"
    assert got.steps["load"]["partitions"]["will_run"] == 4
    assert got.steps["score"]["reason"] == "refresh_cascade"
    assert got.steps["total"]["reason"] == "refresh_cascade"
    assert take_executed(root) == ["load a", "load b", "load c", "load d",
                                   "score a", "score b", "score c", "score d", "total"]

    only = pipeline.get("score", "pipeline.py", refresh="score").expect(0)
    assert only.statuses() == {"load": "cached", "score": "ran"}
    assert take_executed(root) == ["score a", "score b", "score c", "score d"]

    narrowed = pipeline.get("score", "pipeline.py", refresh="load",
                            partition=("k=b",)).expect(0)
    assert narrowed.json["steps_executed"] == 2
    assert take_executed(root) == ["load b", "score b"]


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
def keyed(engine: Engine) -> Engine:
    write(engine.root, {"pipeline.py": KEYED, "versions.json": '{"a": 1, "b": 2, "c": 3}'})
    return engine


def test_partition_narrows_keys_known_only_after_the_source_ran(keyed: Engine) -> None:
    got = keyed.get("cleaned", "pipeline.py", partition=("k=b",)).expect(0)
    assert got.json["final_output"] == {"k=b": "b@2"}
    assert take_executed(keyed.root) == ["cleaned b"]
    full = keyed.get("cleaned", "pipeline.py").expect(0)
    assert full.steps["cleaned"]["partitions"]["will_run_keys"] == ["k=a", "k=c"]
    assert take_executed(keyed.root) == ["cleaned a", "cleaned c"]


def test_partition_value_absent_from_a_dynamic_source_computes_nothing_and_says_so(
        keyed: Engine) -> None:
    got = keyed.get("cleaned", "pipeline.py", partition=("k=zz",)).expect(0)
    assert got.json["final_output"] == {}
    assert take_executed(keyed.root) == []
    said = "--partition k=zz matches no key of pipeline.py:cleaned; it computes nothing"
    assert [w["message"] for w in got.json["warnings"]] == [said]
    assert f"[barca] warning: {said}" in got.stderr


def test_get_json_says_what_the_selection_kept_left_out_and_skipped(pipeline: Engine) -> None:
    expected = {"selection": {"k": ["b", "c"]},
                "nodes": [{"id": "pipeline.py:load", "selected": 2, "skipped": 2},
                          {"id": "pipeline.py:score", "selected": 2, "skipped": 2}],
                "skipped_nodes": ["pipeline.py:total"]}
    dry = pipeline.get(None, "pipeline.py", partition=("k=c,b",), dry_run=True)
    assert dry.json["partition_selection"] == expected
    got = pipeline.get(None, "pipeline.py", partition=("k=c,b",)).expect(0)
    assert got.json["partition_selection"] == expected
    assert "partition_selection" not in pipeline.get("score", "pipeline.py").json


def test_selection_counts_are_null_while_a_nodes_keys_are_unknown(engine: Engine) -> None:
    write(engine.root, {"pipeline.py": """
        from barca import asset, partitions_from

        @asset()
        def ids() -> list:
            return ["x", "y", "z"]

        @asset(partitions={"id": partitions_from(ids)})
        def per(id: str) -> str:
            return id * 2
    """})
    dry = engine.get("per", "pipeline.py", partition=("id=y",), dry_run=True)
    assert dry.json["partition_selection"]["nodes"] == [
        {"id": "pipeline.py:per", "selected": None, "skipped": None}]
    got = engine.get("per", "pipeline.py", partition=("id=y",)).expect(0)
    assert got.json["partition_selection"]["nodes"] == [
        {"id": "pipeline.py:per", "selected": 1, "skipped": 2}]
    assert got.json["final_output"] == {"id=y": "yy"}


# -- failed keys: a key fails when a file `fail_<key>` exists in the project -----------------


@pytest.fixture
def failing(engine: Engine) -> Engine:
    """The failing pipeline, with keys b and d of `load` set to fail."""
    write(engine.root, {"pipeline.py": FAILING, "fail_b": "", "fail_d": ""})
    return engine


def _node(root: Path, name: str) -> tuple[dict, dict]:
    status = barca_here(root, "status", "--json", "pipeline.py").expect(0).json
    return next(n for n in status["nodes"] if n["name"] == name), status


def test_the_next_run_runs_only_the_failed_keys(failing: Engine) -> None:
    root = failing.root
    failing.get("total", "pipeline.py").expect(1)
    take_executed(root)
    (root / "fail_b").unlink()

    still = failing.get("total", "pipeline.py").expect(1)   # d still fails
    assert still.json["failed_node"] == "pipeline.py:load[k=d]"
    assert still.steps["load"]["partitions"]["will_run_keys"] == ["k=b", "k=d"]
    assert take_executed(root) == ["load b", "load d", "score b"]

    (root / "fail_d").unlink()
    fixed = failing.get("total", "pipeline.py").expect(0)
    assert fixed.steps["load"]["partitions"]["will_run_keys"] == ["k=d"]
    assert "last run failed: boom on d" in fixed.steps["load"]["detail"]
    assert take_executed(root) == ["load d", "score d", "total"]
    assert fixed.json["final_output"] == ["v-a!", "v-b!", "v-c!", "v-d!"]


def test_status_shows_the_failed_keys_and_blocks_the_readers_of_those_keys(
        failing: Engine) -> None:
    root = failing.root
    failing.get("total", "pipeline.py").expect(1)

    load, status = _node(root, "load")
    assert load["cache"]["state"] == "partial"
    assert load["partitions"]["total"] == 4 and load["partitions"]["cached"] == 2
    assert load["partitions"]["failed"] == 2
    assert load["partitions"]["failed_keys"] == ["k=b", "k=d"]
    assert load["partitions"]["missing_keys"] == ["k=b", "k=d"]
    # the four shares the web UI draws, reconciled by the server: they add up to the total
    assert load["partitions"]["shares"] == {"cached": 2, "stale": 0, "failed": 2, "blocked": 0}
    assert load["partitions"]["failed_still_cached"] == 0
    assert "boom on b" in load["cache"]["detail"]

    score, _ = _node(root, "score")
    assert score["cache"]["state"] == "blocked"
    assert score["partitions"]["blocked"] == 2
    assert score["partitions"]["blocked_keys"] == ["k=b", "k=d"]
    assert score["partitions"]["failed"] == 0 and score["partitions"]["cached"] == 2
    assert score["partitions"]["shares"] == {"cached": 2, "stale": 0, "failed": 0, "blocked": 2}
    assert status["summary"]["blocked"] == 1 and status["summary"]["partial"] == 1

    # fixing one key unblocks exactly that key
    (root / "fail_b").unlink()
    failing.get("total", "pipeline.py").expect(1)
    assert _node(root, "load")[0]["partitions"]["failed_keys"] == ["k=d"]
    assert _node(root, "score")[0]["partitions"]["blocked_keys"] == ["k=d"]


def test_a_failed_partitioned_target_still_returns_its_good_keys(failing: Engine) -> None:
    got = failing.get("load", "pipeline.py").expect(1)
    assert got.json["final_output"] == {"k=a": "v-a", "k=c": "v-c"}


def test_a_cutoff_asset_with_a_failed_key_blocks_only_that_key_of_its_reader(
        failing: Engine) -> None:
    """With cutoff=True the reader is planned from the keys' bytes: its good keys still run,
    and a failed key's old bytes never make its reader's key look cached."""
    root = failing.root
    cutoff = FAILING.replace('partitions(["a", "b", "c", "d"])})',
                             'partitions(["a", "b", "c", "d"])}, cutoff=True)')
    write(root, {"pipeline.py": cutoff, "fail_b": "", "fail_d": ""})
    got = failing.get("score", "pipeline.py").expect(1)
    assert got.statuses()["score"] == "partial"
    assert take_executed(root) == ["load a", "load b", "load c", "load d", "score a", "score c"]

    (root / "fail_b").unlink()
    (root / "fail_d").unlink()
    failing.get("score", "pipeline.py").expect(0)
    assert take_executed(root) == ["load b", "load d", "score b", "score d"]

    # b fails again under new code; a, c and d give the same bytes: their readers stay cached
    write(root, {"pipeline.py": cutoff.replace('"v-" + k', '"v-" + str(k)'),
                 "fail_b": ""})
    got = failing.get("score", "pipeline.py").expect(1)
    assert take_executed(root) == ["load a", "load b", "load c", "load d"]
    assert got.statuses()["score"] == "skipped"  # a, c, d cached; b blocked, not cached

    # fixed, b gives the bytes score[b] was computed from: it is cached, nothing else runs
    (root / "fail_b").unlink()
    failing.get("score", "pipeline.py").expect(0)
    assert take_executed(root) == ["load b"]
