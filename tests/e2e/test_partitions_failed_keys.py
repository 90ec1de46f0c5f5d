"""Failed keys: siblings finish, the run exits 1, the next run runs only what failed.

A key fails when a file `fail_<key>` exists in the project; deleting it "fixes" the key.
`status --json` lists the failed keys, and a reader that reads them key-for-key is `blocked`
for those keys (and only those).

End to end against real workers: siblings finish and the run exits 1 with its error envelope
and history. The next run, `status`, a failed target's good keys and a cutoff asset's failed
key are tested at the driver level in tests/engine/test_partition_selection_rules.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, take_executed, write
from rule_pipelines.partition_selection import FAILING


@pytest.fixture
def failing(project: Path) -> Path:
    """The pipeline after a first run in which keys b and d of `load` failed."""
    write(project, {"pipeline.py": FAILING, "fail_b": "", "fail_d": ""})
    return project


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


