"""`--partition DIM=VALUE[,VALUE]` narrows a run; `--refresh` on a partitioned node reruns keys.

A selected key gets the same run hash and artifact as in a full run, so a later full run
computes only the others. A `collect` fan-in cannot run on part of its keys: it is skipped with
reason `partition_selection`. Naming a dimension or a value that does not exist is exit 2.

End to end against real workers: a narrowed run, then a full run of the other keys. The other
selection and refresh rules are tested at the driver level in
tests/engine/test_partition_selection_rules.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, take_executed, write
from rule_pipelines.partition_selection import PIPELINE


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


