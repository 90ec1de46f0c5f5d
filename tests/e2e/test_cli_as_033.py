"""Flags of the published 0.33 CLI, on the real command: `-V`, `history --triggered-by`,
`logs --timestamps`, `plan --partition`."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import barca, drive, write

from barca import __version__

PIPELINE = """
from barca import asset, collect, partitions, partitions_from, sensor

@asset(partitions={"region": partitions(["emea", "amer", "apac"]),
                   "day": partitions(["d1", "d2"])})
def sales(region: str, day: str) -> int:
    print("sales", region, day)
    return 1

@asset(partitions={"region": partitions(["emea", "amer", "apac"])})
def regional(region: str) -> int:
    return 1

@asset(inputs={"regions": collect(regional)})
def total(regions: list) -> int:
    return sum(regions)

@sensor()
def versions() -> dict:
    return {"emea": 1}

@asset(partitions={"region": partitions_from(versions)})
def keyed(region: str) -> int:
    return 1
"""


def test_dash_v_prints_the_version(project: Path) -> None:
    assert barca(project, "-V").expect(0).stdout == f"barca, version {__version__}\n"
    assert barca(project, "--version").expect(0).stdout == f"barca, version {__version__}\n"


def test_history_triggered_by_keeps_the_runs_started_that_way(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    by_cli = barca(project, "get", "regional", "pipeline.py").expect(0).json["run_id"]
    by_python = drive(project, "import json, barca\nbarca.get('regional', 'pipeline.py')\n"
                               "print(json.dumps({'ok': True}))\n")
    assert by_python == {"ok": True}

    def runs(*args: str) -> list[tuple[str, str]]:
        body = barca(project, "history", *args, "--fields", "run_id,triggered_by").expect(0)
        return [(r["run_id"], r["triggered_by"]) for r in body.json["runs"]]

    every = runs()
    assert [who for _, who in every] == ["python", "cli"]
    assert runs("--triggered-by", "cli") == [(by_cli, "cli")]
    assert runs("--triggered-by", "python") == every[:1]
    assert runs("--triggered-by", "manual") == every  # 0.33's word for a person's runs
    assert runs("--triggered-by", "schedule,api") == []
    bad = barca(project, "history", "--triggered-by", "client").expect(2).envelope
    assert "client" in bad["error"] and "schedule" in bad["remediation"]
    one = barca(project, "history", by_cli, "--triggered-by", "cli").expect(2).envelope
    assert "--triggered-by" in one["error"]


def test_logs_timestamps_start_each_line_with_its_moment(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    run_id = barca(project, "get", "sales", "pipeline.py").expect(0).json["run_id"]
    plain = barca(project, "logs", run_id).expect(0).stdout.splitlines()
    stamped = barca(project, "logs", run_id, "--timestamps").expect(0).stdout.splitlines()
    moment = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    assert len(stamped) == len(plain) == 6
    for line, bare in zip(stamped, plain):
        assert re.fullmatch(f"{moment} " + re.escape(bare), line), line
    stamps = [line.split(" ", 1)[0] for line in stamped]
    json_ts = [line["ts"] for line in barca(project, "logs", run_id, "--json").expect(0).json]
    assert stamps == json_ts
    grouped = barca(project, "logs", run_id, "--timestamps", "--pretty").expect(0).stdout
    assert re.search(f"^  {moment} sales emea d1$", grouped, re.M), grouped


def test_plan_partition_says_what_the_selection_narrows_and_skips(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    assert "partition_selection" not in barca(project, "plan", "pipeline.py").expect(0).json
    body = barca(project, "plan", "pipeline.py", "--partition", "region=emea,amer").expect(0)
    assert body.json["partition_selection"] == {
        "selection": {"region": ["amer", "emea"]},
        "nodes": [{"id": "pipeline.py:regional", "selected": 2, "skipped": 1},
                  {"id": "pipeline.py:sales", "selected": 4, "skipped": 2},
                  {"id": "pipeline.py:keyed", "selected": None, "skipped": None}],
        "skipped_nodes": ["pipeline.py:total"]}
    assert body.json["total_steps"] == 5  # the phases are the pipeline's, as without it
    assert not (project / ".barca").exists()  # planning runs nothing and writes nothing
    both = barca(project, "plan", "pipeline.py", "--partition", "region=emea",
                 "--partition", '{"day": "d2"}').expect(0).json["partition_selection"]
    assert both["nodes"][1] == {"id": "pipeline.py:sales", "selected": 1, "skipped": 5}
    bad = barca(project, "plan", "pipeline.py", "--partition", "shop=s1").expect(2).envelope
    assert "'shop'" in bad["error"] and "region" in bad["remediation"]
