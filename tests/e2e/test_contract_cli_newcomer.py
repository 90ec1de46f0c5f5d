"""What a newcomer trips on, each on the real CLI: plan's output flags, one vocabulary for
what always runs, the re-execution rate named as such, "did you mean", the corrected command
for a wrong argument order, a NaN sensor value explained, bounded dry-run lines, and the
README saying where `barca` comes from. Refusals and reads of list/status run barca's entry
point in this process (`barca_here`); plan's test and the runs use the real command."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, barca_here, write

PIPELINE = """
from barca import asset, sensor, task

@sensor()
def ping() -> int:
    return 1

@asset()
def orders() -> list:
    return [1, 2, 3]

@asset(inputs={"orders": orders})
def summary(orders: list) -> dict:
    return {"n": len(orders)}

@task(inputs={"summary": summary})
def publish(summary: dict) -> None:
    print(summary)
"""

KEYED = """
import os
from barca import asset, partitions_from, sensor

@sensor()
def versions() -> dict:
    bad = os.environ.get("BAD")
    v = os.environ.get("V", "1")
    out = {f"r{i}": (v if i < 60 else "1") for i in range(100)}
    if bad:
        out["r7"] = float(bad)
    return out

@asset(partitions={"retailer": partitions_from(versions)})
def per(retailer: str, versions: str) -> str:
    return str(versions)
"""


def test_plan_takes_json_and_pretty_like_every_command(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    plain = barca(project, "plan", "pipeline.py").expect(0).json
    assert barca(project, "plan", "pipeline.py", "--json").expect(0).json == plain
    assert barca(project, "plan", "pipeline.py", "--pretty").expect(0).json == plain
    both = barca(project, "plan", "pipeline.py", "--json", "--pretty").expect(2)
    assert both.envelope["kind"] == "usage"


def test_list_and_status_use_one_word_for_what_always_runs(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    listed = barca_here(project, "list", "pipeline.py", "--pretty").expect(0).stdout
    status = barca_here(project, "status", "pipeline.py", "--pretty").expect(0).stdout
    fresh = {line.split()[0]: line.split()[2] for line in listed.splitlines()[1:]}
    state = {line.split()[0]: line.split()[2] for line in status.splitlines()[1:]
             if line.startswith("pipeline.py:")}
    for name in ("pipeline.py:ping", "pipeline.py:publish"):
        assert fresh[name] == state[name] == "always-runs"
    assert fresh["pipeline.py:orders"] == "when-stale" and state["pipeline.py:orders"] != \
        "always-runs"
    assert "always " not in listed + " "  # the bare word is gone from the table
    nodes = {n["id"]: n for n in barca_here(project, "list", "pipeline.py").expect(0).json["nodes"]}
    assert nodes["pipeline.py:orders"]["freshness"] == "always"  # the JSON policy name stays


def test_stats_names_its_figure_the_rerun_rate(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    for _ in range(2):
        barca(project, "run", "publish", "pipeline.py").expect(0)
    body = barca(project, "stats", "publish", "pipeline.py").expect(0).json
    assert body["rerun_rate"] == 0.5 and body["cache_hit_rate"] is None
    text = barca(project, "stats", "publish", "pipeline.py", "--pretty").expect(0).stdout
    assert "(rerun_rate): 50.0%" in text and "cache_hit_rate" not in text


def test_misspelled_target_names_the_closest_node_ids(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    result = barca_here(project, "get", "sumary", "pipeline.py").expect(2)
    assert "did you mean pipeline.py:summary?" in result.envelope["error"]
    assert "barca list" in result.envelope["remediation"]
    far = barca_here(project, "get", "zzzz", "pipeline.py").expect(2)
    assert "did you mean" not in far.envelope["error"]
    assert not (project / ".barca").exists()


def test_target_after_the_files_answers_with_the_corrected_command(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    result = barca_here(project, "get", "pipeline.py", "summary").expect(2)
    assert result.envelope["remediation"] == "barca get summary pipeline.py"
    assert "target goes first" in result.envelope["error"]
    shorthand = barca_here(project, "pipeline.py", "summary").expect(2)  # `barca FILE` is `get`
    assert shorthand.envelope["remediation"] == "barca get summary pipeline.py"
    task = barca_here(project, "run", "pipeline.py", "publish").expect(2)
    assert task.envelope["remediation"] == "barca run publish pipeline.py"
    several = barca_here(project, "get", "pipeline.py", "summary", "orders").expect(2)
    assert "TARGET[,TARGET] FILES" in several.envelope["remediation"]
    assert not (project / ".barca").exists()  # nothing ran


def test_nan_sensor_value_is_called_nan_with_what_to_do(project: Path) -> None:
    write(project, {"pipeline.py": KEYED})
    result = barca(project, "get", "per", "pipeline.py", env={"BAD": "nan"}).expect(1)
    error = result.json["error"]
    assert "'r7' is NaN" in error and "return a finite number" in error
    assert "JSON-writable" not in error
    inf = barca(project, "get", "per", "pipeline.py", env={"BAD": "inf"}).expect(1)
    assert "'r7' is Infinity" in inf.json["error"]


def test_dry_run_line_with_many_changed_keys_is_cut_with_a_count(project: Path) -> None:
    write(project, {"pipeline.py": KEYED})
    barca(project, "get", "per", "pipeline.py").expect(0)
    dry = barca(project, "get", "per", "pipeline.py", "--dry-run", "--pretty",
                env={"V": "2"}).expect(0)
    line = next(line for line in dry.stdout.splitlines() if line.endswith("pipeline.py:per"))
    assert len(line) < 200
    assert "40 of 100 keys cached; will run: retailer=r0, retailer=r1" in line
    assert "and 57 more (value pipeline.py:versions changed)" in line
    assert line.count("changed") == 1
    detail = barca(project, "get", "per", "pipeline.py", "--dry-run",
                   env={"V": "2"}).expect(0).steps["per"]
    assert detail["partitions"]["will_run"] == 60  # the JSON keeps its counts


def test_readme_says_bare_barca_needs_the_virtualenv_active() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    setup, _, rest = readme.partition("## A pipeline")
    assert "source .venv/bin/activate" in setup and ".venv/bin/barca" in setup
    assert "\nbarca get summary pipeline.py" in rest  # the bare commands it explains
