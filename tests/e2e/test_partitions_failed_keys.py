"""Failed keys: siblings finish, the run exits 1, the next run runs only what failed.

A key fails when a file `fail_<key>` exists in the project; deleting it "fixes" the key.
`status --json` lists the failed keys, and a reader that reads them key-for-key is `blocked`
for those keys (and only those).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, take_executed, write

PIPELINE = """
    from pathlib import Path
    from barca import asset, collect, partitions, partitions_from

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={"k": partitions(["a", "b", "c", "d"])})
    def load(k: str) -> str:
        _ran("load " + k)
        if Path("fail_" + k).exists():
            raise ValueError("boom on " + k)
        return "v-" + k

    @asset(partitions={"k": partitions_from(load)})
    def score(k: str, load: str) -> str:
        _ran("score " + k)
        return load + "!"

    @asset(inputs={"all": collect(score)})
    def total(all: list) -> list:
        _ran("total")
        return all
"""


@pytest.fixture
def failing(project: Path) -> Path:
    """The pipeline after a first run in which keys b and d of `load` failed."""
    write(project, {"pipeline.py": PIPELINE, "fail_b": "", "fail_d": ""})
    return project


def _node(status: dict, name: str) -> dict:
    return next(n for n in status["nodes"] if n["name"] == name)


def test_failed_keys_let_their_siblings_finish_and_the_run_exits_1(failing: Path) -> None:
    got = barca(failing, "get", "total", "pipeline.py").expect(1)
    assert got.json["status"] == "failed"
    assert got.json["failed_node"] in ("pipeline.py:load[k=b]", "pipeline.py:load[k=d]")
    assert got.statuses()["total"] == "skipped"
    assert got.steps["total"]["reason"] == "upstream_failed"
    assert take_executed(failing) == ["load a", "load b", "load c", "load d", "score a", "score c"]
    assert got.envelope["kind"] == "step_failed" and got.envelope["code"] == 1

    steps = barca(failing, "history", got.json["run_id"], "--json").expect(0).json["steps"]
    by_key = {(s["node_id"].split(":")[1], s["partition_key"]): s for s in steps}
    assert by_key[("load", "k=b")]["status"] == "failed"
    assert "boom on b" in by_key[("load", "k=b")]["error"]
    assert by_key[("load", "k=a")]["status"] == "success"
    assert by_key[("score", "k=c")]["status"] == "success"
    assert ("score", "k=b") not in by_key

    # the siblings are cached: asking for them again runs nothing
    again = barca(failing, "get", "score", "pipeline.py", "--partition", "k=a,c").expect(0)
    assert again.json["steps_executed"] == 0
    assert again.json["final_output"] == {"k=a": "v-a!", "k=c": "v-c!"}


def test_the_next_run_runs_only_the_failed_keys(failing: Path) -> None:
    barca(failing, "get", "total", "pipeline.py").expect(1)
    take_executed(failing)
    (failing / "fail_b").unlink()

    still = barca(failing, "get", "total", "pipeline.py").expect(1)   # d still fails
    assert still.json["failed_node"] == "pipeline.py:load[k=d]"
    assert still.steps["load"]["partitions"]["will_run_keys"] == ["k=b", "k=d"]
    assert take_executed(failing) == ["load b", "load d", "score b"]

    (failing / "fail_d").unlink()
    fixed = barca(failing, "get", "total", "pipeline.py").expect(0)
    assert fixed.steps["load"]["partitions"]["will_run_keys"] == ["k=d"]
    assert "last run failed: boom on d" in fixed.steps["load"]["detail"]
    assert take_executed(failing) == ["load d", "score d", "total"]
    assert fixed.json["final_output"] == ["v-a!", "v-b!", "v-c!", "v-d!"]


def test_status_shows_the_failed_keys_and_blocks_the_readers_of_those_keys(
        failing: Path) -> None:
    barca(failing, "get", "total", "pipeline.py").expect(1)
    status = barca(failing, "status", "--json", "pipeline.py").expect(0).json

    load = _node(status, "load")
    assert load["cache"]["state"] == "partial"
    assert load["partitions"]["total"] == 4 and load["partitions"]["cached"] == 2
    assert load["partitions"]["failed"] == 2
    assert load["partitions"]["failed_keys"] == ["k=b", "k=d"]
    assert load["partitions"]["missing_keys"] == ["k=b", "k=d"]
    assert "boom on b" in load["cache"]["detail"]
    # the four shares the web UI draws, reconciled by the server: they add up to the total
    assert load["partitions"]["shares"] == {"cached": 2, "stale": 0, "failed": 2, "blocked": 0}
    assert load["partitions"]["failed_still_cached"] == 0

    score = _node(status, "score")
    assert score["cache"]["state"] == "blocked"
    assert score["partitions"]["blocked"] == 2
    assert score["partitions"]["blocked_keys"] == ["k=b", "k=d"]
    assert score["partitions"]["failed"] == 0 and score["partitions"]["cached"] == 2
    assert score["partitions"]["shares"] == {"cached": 2, "stale": 0, "failed": 0, "blocked": 2}
    assert status["summary"]["blocked"] == 1 and status["summary"]["partial"] == 1

    # fixing one key unblocks exactly that key
    (failing / "fail_b").unlink()
    barca(failing, "get", "total", "pipeline.py").expect(1)
    after = barca(failing, "status", "--json", "pipeline.py").expect(0).json
    assert _node(after, "load")["partitions"]["failed_keys"] == ["k=d"]
    assert _node(after, "score")["partitions"]["blocked_keys"] == ["k=d"]


def test_a_failed_partitioned_target_still_returns_its_good_keys(failing: Path) -> None:
    got = barca(failing, "get", "load", "pipeline.py").expect(1)
    assert got.json["final_output"] == {"k=a": "v-a", "k=c": "v-c"}


def test_a_cutoff_asset_with_a_failed_key_blocks_only_that_key_of_its_reader(
        failing: Path) -> None:
    """With cutoff=True the reader is planned from the keys' bytes: its good keys still run,
    and a failed key's old bytes never make its reader's key look cached."""
    cutoff = PIPELINE.replace('partitions(["a", "b", "c", "d"])})',
                              'partitions(["a", "b", "c", "d"])}, cutoff=True)')
    write(failing, {"pipeline.py": cutoff, "fail_b": "", "fail_d": ""})
    got = barca(failing, "get", "score", "pipeline.py").expect(1)
    assert got.statuses()["score"] == "partial"
    assert take_executed(failing) == ["load a", "load b", "load c", "load d", "score a", "score c"]

    (failing / "fail_b").unlink()
    (failing / "fail_d").unlink()
    barca(failing, "get", "score", "pipeline.py").expect(0)
    assert take_executed(failing) == ["load b", "load d", "score b", "score d"]

    # b fails again under new code; a, c and d give the same bytes: their readers stay cached
    write(failing, {"pipeline.py": cutoff.replace('"v-" + k', '"v-" + k  # edited'),
                    "fail_b": ""})
    got = barca(failing, "get", "score", "pipeline.py").expect(1)
    assert take_executed(failing) == ["load a", "load b", "load c", "load d"]
    assert got.statuses()["score"] == "skipped"  # a, c, d cached; b blocked, not cached

    # fixed, b gives the bytes score[b] was computed from: it is cached, nothing else runs
    (failing / "fail_b").unlink()
    barca(failing, "get", "score", "pipeline.py").expect(0)
    assert take_executed(failing) == ["load b"]
