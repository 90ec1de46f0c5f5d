"""How a dry run plans partitioned steps, at the driver level (moved from
tests/e2e/test_partitions_dry_run.py, which keeps the human table lines and one prediction
against real workers).

JSON: `steps[].action == "partial"` with `partitions{total, cached, will_run, will_run_keys}`
(at most 20 keys, in declared order: a keyed source's dict order, `dim=value`) and
`partitions.changed` giving each listed key that ran before its cause. The sensor is observed, nothing else runs, nothing is written; the
real run then executes exactly the keys the dry run named.
"""

from __future__ import annotations

import json

import pytest

from conftest import lines, write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)
from rule_pipelines.partition_dry_run import (BASE, CHAIN, PIPELINE, store_snapshot,
                                               write_versions)


def test_dry_run_json_counts_keys_lists_at_most_20_and_gives_each_ones_cause(
        engine: Engine) -> None:
    warm = engine.root
    write(warm, {"pipeline.py": PIPELINE})
    write_versions(warm)
    engine.get("cleaned", "pipeline.py").expect(0)
    (warm / "executed.log").unlink()

    write_versions(warm, changed=range(3, 27), new=2)    # 24 changed + 2 new of 32
    before = store_snapshot(warm)
    dry = engine.get("cleaned", "pipeline.py", dry_run=True)
    assert dry.json["dry_run"] is True
    step = dry.steps["cleaned"]
    assert step["action"] == "partial"
    parts = step["partitions"]
    assert (parts["total"], parts["cached"], parts["will_run"]) == (32, 6, 26)
    # the dict's order: r29 down to r00, then the new n00 and n01 (issue 29)
    expected = ([f"retailer=r{i:02d}" for i in reversed(range(3, 27))]
                + ["retailer=n00", "retailer=n01"])[:20]
    assert parts["will_run_keys"] == expected           # first 20 in declared order
    assert all(key.startswith("retailer=") for key in parts["will_run_keys"])
    # every listed key that ran before has its cause; new keys have none
    assert parts["changed"] == {k: ["value pipeline.py:retailer_versions"]
                                for k in expected if not k.startswith("retailer=n")}
    assert dry.json["summary"] == {"will_run": 27, "cached": 6, "unknown": 0}
    assert dry.steps["cleaned"]["detail"].endswith(", +6 more")  # 20 keys named, then a count
    assert store_snapshot(warm) == before
    assert not (warm / "executed.log").exists()

    real = engine.get("cleaned", "pipeline.py").expect(0)
    assert real.json["steps_executed"] == dry.json["summary"]["will_run"]
    assert len(lines(warm / "executed.log")) == 26


@pytest.mark.parametrize("warm, versions, options", [
    (False, BASE, {}),
    (True, BASE, {}),
    (True, {**BASE, "b": 2}, {}),
    (True, {**BASE, "e": 1}, {}),
    (True, {"a": 1, "c": 1, "d": 1}, {}),
    (True, {**BASE, "b": 2, "c": 2}, {"partition": ("k=b",)}),
    (True, BASE, {"refresh": "scored"}),
    ("failed", BASE, {}),
], ids=["cold", "warm", "value-changed", "key-added", "key-removed", "partition", "refresh",
        "after-failure"])
def test_dry_run_predicts_exactly_the_keys_the_real_run_executes(engine: Engine, warm,
                                                                 versions, options) -> None:
    project = engine.root
    write(project, {"pipeline.py": CHAIN})
    if warm:
        first = {**BASE, "d": "fail"} if warm == "failed" else BASE
        (project / "versions.json").write_text(json.dumps(first))
        engine.get("summary", "pipeline.py").expect(1 if warm == "failed" else 0)
        (project / "executed.log").unlink()
    (project / "versions.json").write_text(json.dumps(versions))
    before = store_snapshot(project) if warm else None

    # summary reads every key: with --partition it is in the run (skipped), not its target
    target = None if "partition" in options else "summary"
    dry = engine.get(target, "pipeline.py", dry_run=True, **options)
    assert not (project / "executed.log").exists()
    if warm:
        assert store_snapshot(project) == before
    else:
        assert not (project / ".barca").exists()

    real = engine.get(target, "pipeline.py", **options).expect(0)
    assert dry.json["summary"]["will_run"] == real.json["steps_executed"]
    predicted = []
    for name in ("cleaned", "scored"):
        predicted += [f"{name} {k}" for k in dry.steps[name]["partitions"]["will_run_keys"]]
        assert dry.steps[name]["partitions"] == real.steps[name]["partitions"]
    if dry.steps["summary"]["action"] == "run":
        predicted.append("summary")
    assert sorted(lines(project / "executed.log")) == sorted(predicted)
