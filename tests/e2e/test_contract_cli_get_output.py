"""`get -o value|path|json|pretty` and `--fields` on the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import barca, write

PIPELINE = """
from barca import asset, partitions

@asset()
def orders() -> list:
    return [1, 2, 3]

@asset(partitions={"region": partitions(["emea", "amer"])})
def sales(region: str) -> dict:
    return {"region": region}

@asset(inputs={"orders": orders})
def summary(orders: list) -> dict:
    return {"n": len(orders)}
"""


def test_output_value_prints_only_the_value(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    one = barca(project, "get", "summary", "pipeline.py", "-o", "value").expect(0)
    assert json.loads(one.stdout) == {"n": 3}
    keyed = barca(project, "get", "sales", "pipeline.py", "--output", "value").expect(0)
    assert json.loads(keyed.stdout) == {"region=amer": {"region": "amer"},
                                        "region=emea": {"region": "emea"}}
    several = barca(project, "get", "summary,orders", "pipeline.py", "-o", "value").expect(0)
    assert json.loads(several.stdout) == {"summary": {"n": 3}, "orders": [1, 2, 3]}
    dry = barca(project, "get", "summary", "pipeline.py", "--dry-run", "-o", "value").expect(0)
    assert [s["action"] for s in json.loads(dry.stdout)] == ["cached", "cached"]


def test_output_path_prints_one_result_file_per_key(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    paths = barca(project, "get", "sales", "pipeline.py", "-o", "path").expect(0)
    lines = paths.stdout.splitlines()
    assert len(lines) == 2
    values = [json.loads((project / line).read_text()) for line in lines]
    assert values == [{"region": "amer"}, {"region": "emea"}]  # in key order
    one = barca(project, "get", "summary", "pipeline.py", "-o", "path").expect(0)
    assert json.loads((project / one.stdout.strip()).read_text()) == {"n": 3}
    sub = project / "sub"
    sub.mkdir()
    there = barca(sub, "get", "summary", "../pipeline.py", "-o", "path").expect(0)
    assert Path(there.stdout.strip()).is_absolute() and Path(there.stdout.strip()).exists()
    refused = barca(project, "get", "summary", "pipeline.py", "-o", "path", "--dry-run")
    assert refused.expect(2).envelope["kind"] == "usage"


def test_output_json_and_pretty_and_conflicts(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    body = barca(project, "get", "summary", "pipeline.py", "-o", "json").expect(0).json
    assert body["final_output"] == {"n": 3}
    pretty = barca(project, "get", "summary", "pipeline.py", "-o", "pretty").expect(0)
    assert pretty.stdout.startswith("Run ")
    both = barca(project, "get", "summary", "pipeline.py", "-o", "value", "--json").expect(2)
    assert "-o" in both.envelope["error"]
    bad = barca(project, "get", "summary", "pipeline.py", "-o", "yaml").expect(2)
    assert bad.envelope["kind"] == "usage"


def test_fields_keeps_only_those_keys_of_each_step(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "summary", "pipeline.py", "--fields", "colour").expect(2)
    assert not (project / ".barca").exists()  # checked before anything runs
    body = barca(project, "get", "summary", "pipeline.py", "--fields", "id,status").expect(0)
    assert [set(s) for s in body.json["steps"]] == [{"id", "status"}] * 2
    assert body.json["final_output"] == {"n": 3}  # only the steps are trimmed
    dry = barca(project, "get", "summary", "pipeline.py", "--dry-run", "--fields",
                "id,action").expect(0).json
    assert [set(s) for s in dry["steps"]] == [{"id", "action"}] * 2
    unknown = barca(project, "get", "summary", "pipeline.py", "--fields", "id,colour")
    assert "valid fields" in unknown.expect(2).envelope["remediation"]
    for flags in (["--pretty"], ["-o", "value"], ["-o", "path"]):
        refused = barca(project, "get", "summary", "pipeline.py", "--fields", "id", *flags)
        assert refused.expect(2).envelope["kind"] == "usage"
