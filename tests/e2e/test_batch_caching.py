"""Caching stays per key under batch= (issue 14; `barca docs batch`, "What stays the same" and
"Overrides for one run"), end to end against real workers: a few stale keys under `--batch
none` run one call each, and `barca.get(..., batch="all")` and `batch={"scored": 2}` from
Python group the same way as the CLI (naming a node without batch= raises a UsageError).
The other batch caching rules are tested at the driver level in
tests/engine/test_batch_cache_rules.py.

Every batch function appends `[node, keys]` to calls.log, so the tests see which calls
really ran.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import barca, drive, take_calls
from rule_pipelines.batch_cache import EXPECTED, RETAILERS, VERSIONS, setup


def full_run(root: Path) -> dict:
    got = barca(root, "get", "scored", "pipeline.py").expect(0)
    assert take_calls(root) == {"orders": [RETAILERS], "scored": [RETAILERS]}
    return got.json


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


