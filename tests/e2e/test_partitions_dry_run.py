"""How a dry run reports partitioned steps.

JSON: `steps[].action == "partial"` with `partitions{total, cached, will_run, will_run_keys}`
(at most 20 keys, in declared order: a keyed source's dict order, `dim=value`) and
`partitions.changed` giving each listed key that ran before its cause. Human: `partial  <c> of
<t> keys cached; will run: retailer=r.. (value ... changed), ..., +N more`. The sensor is
observed, nothing else runs, nothing is written.

End to end against real workers: the human table lines and one prediction. The JSON counts
and every prediction case are tested at the driver level in
tests/engine/test_partition_dry_run_rules.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import barca, lines, write
from rule_pipelines.partition_dry_run import (BASE, CHAIN, PIPELINE, store_snapshot,
                                               write_versions)


@pytest.fixture
def warm(project: Path) -> Path:
    write(project, {"pipeline.py": PIPELINE})
    write_versions(project)
    barca(project, "get", "cleaned", "pipeline.py").expect(0)
    (project / "executed.log").unlink()
    return project


def test_dry_run_table_line_names_the_keys_that_fit_then_a_count_and_the_cause(
        warm: Path) -> None:
    write_versions(warm, changed=range(5, 29))           # 24 of 30
    dry = barca(warm, "get", "cleaned", "pipeline.py", "--dry-run", "--pretty").expect(0)
    row = next(line for line in dry.stdout.splitlines() if line.startswith("partial"))
    m = re.fullmatch(r"partial\s+6 of 30 keys cached; will run: (?P<keys>.*) and (?P<more>\d+) "
                     r"more \(value pipeline\.py:retailer_versions changed\)"
                     r"\s+pipeline\.py:cleaned", row)
    assert m, row
    listed = m["keys"].split(", ")
    # in the dict's order, which declares r29 first (issue 29)
    assert listed == [f"retailer=r{i:02d}" for i in range(28, 28 - len(listed), -1)]
    assert len(listed) + int(m["more"]) == 24 and len(listed) >= 3
    detail = barca(warm, "get", "cleaned", "pipeline.py", "--dry-run").expect(0)
    assert detail.steps["cleaned"]["detail"].endswith(", +4 more")  # JSON: 20 keys, causes
    assert "25 will run, 6 cached, 0 unknown" in dry.stdout
    assert not (warm / "executed.log").exists()


def test_dry_run_table_line_for_one_changed_key(warm: Path) -> None:
    write_versions(warm, changed=range(10, 11))
    dry = barca(warm, "get", "cleaned", "pipeline.py", "--dry-run", "--pretty").expect(0)
    assert re.search(r"^partial\s+29 of 30 keys cached; will run: retailer=r10 "
                     r"\(value pipeline\.py:retailer_versions changed\)\s+pipeline\.py:cleaned$",
                     dry.stdout, re.M), dry.stdout
    assert re.search(r"^will run\s+sensors always re-run\s+pipeline\.py:retailer_versions$",
                     dry.stdout, re.M), dry.stdout
    assert "+" not in dry.stdout.split("retailer=r10", 1)[1].splitlines()[0]


# every case: tests/engine/test_partition_dry_run_rules.py
@pytest.mark.parametrize("warm, versions, flags", [
    (True, {**BASE, "b": 2}, []),
], ids=["value-changed"])
def test_dry_run_predicts_exactly_the_keys_the_real_run_executes(project: Path, warm, versions,
                                                                 flags) -> None:
    write(project, {"pipeline.py": CHAIN})
    if warm:
        first = {**BASE, "d": "fail"} if warm == "failed" else BASE
        (project / "versions.json").write_text(json.dumps(first))
        barca(project, "get", "summary", "pipeline.py").expect(1 if warm == "failed" else 0)
        (project / "executed.log").unlink()
    (project / "versions.json").write_text(json.dumps(versions))
    before = store_snapshot(project) if warm else None

    # summary reads every key: with --partition it is in the run (skipped), not its target
    target = [] if "--partition" in flags else ["summary"]
    dry = barca(project, "get", *target, "pipeline.py", "--dry-run", *flags).expect(0)
    assert not (project / "executed.log").exists()
    if warm:
        assert store_snapshot(project) == before
    else:
        assert not (project / ".barca").exists()

    real = barca(project, "get", *target, "pipeline.py", *flags).expect(0)
    assert dry.json["summary"]["will_run"] == real.json["steps_executed"]
    predicted = []
    for name in ("cleaned", "scored"):
        predicted += [f"{name} {k}" for k in dry.steps[name]["partitions"]["will_run_keys"]]
        assert dry.steps[name]["partitions"] == real.steps[name]["partitions"]
    if dry.steps["summary"]["action"] == "run":
        predicted.append("summary")
    assert sorted(lines(project / "executed.log")) == sorted(predicted)
