"""Contract semantics (issue 16): inputs named by their id as text, `--partition` refusing a
target it would skip, and `final_output` of partitioned targets (after failed keys, and past a
thousand keys).

End to end against real workers: a refused selection (exit 2), a list asset's new key, and a
Manual asset kept until refreshed. The other rules are tested at the driver level in
tests/engine/test_semantics_rules.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, edit, take_executed, write
from rule_pipelines.semantics import MANUAL, SELECTION


@pytest.mark.parametrize("args", [
    ("get", "total"),
], ids=["target"])  # every case: tests/engine/test_semantics_rules.py
def test_naming_a_node_the_partition_selection_would_skip_is_exit_2(
        project: Path, args: tuple[str, ...]) -> None:
    write(project, {"pipeline.py": SELECTION})
    command, target, *rest = args
    bad = barca(project, command, target, "pipeline.py", *rest, "--partition", "k=a").expect(2)
    assert "--partition k=a would skip" in bad.envelope["error"]
    assert "reads every key of 'pipeline.py:load'" in bad.envelope["error"]
    assert "without --partition" in bad.envelope["remediation"]
    assert take_executed(project) == []
    assert not (project / ".barca" / "artifacts").exists()


def test_a_new_element_of_a_list_asset_runs_only_its_key(project: Path) -> None:
    write(project, {"pipeline.py": """
        import json
        from pathlib import Path
        from barca import asset, collect, partitions_from

        def _ran(name):
            with open("executed.log", "a") as fh:
                fh.write(name + "\\n")

        @asset()
        def ids() -> list:
            _ran("ids")
            return ["a", "b"]

        @asset(partitions={"id": partitions_from(ids)})
        def per(id: str) -> str:
            _ran("per " + id)
            return id * 2

        @asset(partitions={"id": partitions_from(ids)}, inputs={"all": ids})
        def whole(id: str, all: list) -> str:
            _ran("whole " + id)
            return f"{id} of {len(all)}"
    """})
    barca(project, "get", "per,whole", "pipeline.py").expect(0)
    take_executed(project)

    edit(project / "pipeline.py", 'return ["a", "b"]', 'return ["a", "b", "c"]')
    got = barca(project, "get", "per", "pipeline.py").expect(0)
    assert take_executed(project) == ["ids", "per c"]
    assert got.steps["per"]["partitions"]["will_run_keys"] == ["id=c"]
    assert got.json["final_output"] == {"id=a": "aa", "id=b": "bb", "id=c": "cc"}
    # a reader of the whole list depends on all of it: each of its keys reruns
    both = barca(project, "get", "whole", "pipeline.py").expect(0)
    assert take_executed(project) == ["whole a", "whole b", "whole c"]
    assert both.json["final_output"]["id=a"] == "a of 3"
    # an element removed: the other keys stay cached
    edit(project / "pipeline.py", 'return ["a", "b", "c"]', 'return ["a", "c"]')
    assert barca(project, "get", "per", "pipeline.py").expect(0).json["steps_executed"] == 1
    assert take_executed(project) == ["ids"]


def test_a_manual_asset_is_computed_once_then_kept_until_refreshed(project: Path) -> None:
    write(project, {"pipeline.py": MANUAL, "source.txt": "one"})
    never = barca(project, "get", "reader", "pipeline.py").expect(2)
    assert "freshness=Manual" in never.envelope["error"]
    assert "never been computed" in never.envelope["error"]
    assert "--refresh snapshot" in never.envelope["remediation"]
    assert take_executed(project) == []
    barca(project, "get", "reader", "pipeline.py", "--dry-run").expect(2)

    first = barca(project, "get", "reader,per", "pipeline.py", "--refresh", "snapshot")
    assert first.expect(0).json["targets"]["reader"]["final_output"] == "ONE"
    assert take_executed(project) == ["base", "per a", "per b", "reader", "snapshot"]
    assert barca(project, "get", "reader,per", "pipeline.py").expect(0).json[
        "steps_executed"] == 0

    # a code edit does not rerun it: status says stale, the run says why it did not run
    edit(project / "pipeline.py", 'return Path("source.txt").read_text()',
         'return Path("source.txt").read_text().strip()  # edited')
    (project / "source.txt").write_text("two\n")
    status = barca(project, "status", "pipeline.py", "--json").expect(0).json
    node = next(n for n in status["nodes"] if n["name"] == "snapshot")
    assert node["cache"]["state"] == "stale" and node["cache"]["reason"] == "manual"
    assert node["cache"]["changed"] == ["code"]
    assert "--refresh snapshot" in node["cache"]["detail"]
    assert next(n for n in status["nodes"] if n["name"] == "reader")["cache"]["state"] == "cached"
    dry = barca(project, "get", "reader", "pipeline.py", "--dry-run").expect(0)
    assert dry.steps["snapshot"]["action"] == "cached"
    assert dry.steps["snapshot"]["reason"] == "manual"
    assert "kept (freshness=Manual) though changed: code" in dry.steps["snapshot"]["detail"]
    got = barca(project, "get", "reader", "pipeline.py").expect(0)
    assert got.steps["snapshot"]["status"] == "cached"
    assert got.steps["snapshot"]["reason"] == "manual"
    assert got.json["final_output"] == "ONE" and take_executed(project) == []

    # a refresh of its upstream does not cascade to it; --refresh-all, as naming it, does
    barca(project, "get", "reader", "pipeline.py", "--refresh", "base").expect(0)
    assert take_executed(project) == ["base"]
    barca(project, "get", "reader", "pipeline.py", "--refresh-all").expect(0)
    assert take_executed(project) == ["base", "reader", "snapshot"]
    assert barca(project, "get", "reader", "pipeline.py").json["final_output"] == "TWO"
    take_executed(project)


