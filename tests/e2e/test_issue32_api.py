"""Issue 32: the Python API as the published barca has it, collect()'s list sorted by key, and
a DuckDB relation returned by a parallel() branch.

Each test drives the real API in a fresh interpreter (`drive`) or the real command, with real
worker processes, on a pipeline in a temporary project.
"""

from __future__ import annotations

from pathlib import Path

from conftest import barca, drive, edit, take_executed, write

PIPELINE = """
    from barca import asset, sensor, task

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @sensor()
    def weather() -> dict:
        _ran("weather")
        return {"temp": 20}

    @asset(inputs={"weather": weather})
    def reading(weather: dict) -> int:
        _ran("reading")
        return weather["temp"]

    @asset(inputs={"reading": reading})
    def summary(reading: int) -> dict:
        _ran("summary")
        return {"doubled": reading * 2}

    @asset()
    def broken() -> int:
        raise ValueError("broken on purpose")

    @task(inputs={"summary": summary})
    def publish(summary: dict) -> str:
        _ran("publish")
        return f"published {summary['doubled']}"
"""


def test_get_with_a_path_first_brings_the_pipeline_up_to_date(project: Path) -> None:
    """`barca.get("pipeline.py")` is the pipeline, as `barca get pipeline.py` is: every asset
    and sensor, no task, the last asset's value. A target before the file still names one."""
    write(project, {"pipeline.py": PIPELINE.replace("""
    @asset()
    def broken() -> int:
        raise ValueError("broken on purpose")
""", ""), "more/extra.py": """
        from barca import asset

        @asset()
        def extra() -> str:
            return "extra"
    """})
    out = drive(project, f"""
import json, barca
whole = barca.get("pipeline.py")
executed = sorted(open("executed.log").read().split())
absolute = barca.get({str(project / "pipeline.py")!r})
directory = barca.get("more/")
two_files = barca.get("pipeline.py", ["more/extra.py"])
target = barca.get("reading", "pipeline.py")
print(json.dumps({{"whole": whole, "executed": executed, "absolute": absolute,
                  "directory": directory, "two_files": two_files, "target": target}}))
""")
    assert out["whole"] == {"doubled": 40}
    assert out["executed"] == ["reading", "summary", "weather"]  # the task did not run
    assert out["absolute"] == {"doubled": 40} and out["directory"] == "extra"
    assert out["target"] == 20
    assert barca(project, "get", "pipeline.py").expect(0).json["final_output"] == out["whole"]
    cli = barca(project, "get", "pipeline.py", "more/extra.py").expect(0).json
    assert out["two_files"] == cli["final_output"] == {"doubled": 40}  # the last in the graph


def test_history_is_the_list_of_runs_and_n_the_last_n(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "reading", "pipeline.py").expect(0)
    barca(project, "get", "broken", "pipeline.py").expect(1)
    barca(project, "run", "publish", "pipeline.py").expect(0)
    listed = barca(project, "history", "--json").expect(0).json["runs"]
    out = drive(project, f"""
import json, barca

def refused(call):
    try:
        call()
    except barca.UsageError as exc:
        return [exc.message, exc.remediation]

print(json.dumps({{
    "all": barca.history(), "two": barca.history(2), "two_kw": barca.history(limit=2),
    "every": barca.history(all=True),
    "one_run": barca.history(run_id={listed[1]["run_id"][:8]!r}),
    "run_id_first": refused(lambda: barca.history({listed[1]["run_id"]!r})),
}}))
""")
    assert isinstance(out["all"], list) and out["all"] == listed == out["every"]
    assert [r["command"] for r in out["all"]] == ["run", "get", "get"]  # newest first
    assert out["two"] == out["two_kw"] == listed[:2]
    detail = barca(project, "history", listed[1]["run_id"], "--json").expect(0).json
    assert out["one_run"] == detail and detail["steps"][0]["status"] == "failed"
    message, fix = out["run_id_first"]
    assert "how many runs" in message and f"run_id='{listed[1]['run_id']}'" in fix


def test_barca_api_has_the_calls_beside_the_decorators(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    out = drive(project, """
import json, barca, barca.api
from barca.api import BarcaError, get, history, plan, run, stats
print(json.dumps({
    "same": [barca.api.run is barca.run, get is barca.get, history is barca.history,
             plan is barca.plan, stats is barca.stats, BarcaError is barca.BarcaError],
    "ran": barca.api.run("publish", "pipeline.py"),
}))
""")
    assert out == {"same": [True] * 6, "ran": "published 40"}


def test_a_step_failed_reads_with_the_users_traceback(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    out = drive(project, """
import json, barca
try:
    barca.get("broken", "pipeline.py")
except barca.StepFailed as exc:
    print(json.dumps({"text": str(exc), "message": exc.message, "traceback": exc.traceback}))
""")
    assert out["text"].startswith(out["message"] + "\n")
    assert out["text"].endswith(out["traceback"].rstrip())
    assert 'raise ValueError("broken on purpose")' in out["text"]
    assert "in broken" in out["text"]
    # uncaught, as a script shows it: the user's frame is in what Python prints
    (project / "uncaught.py").write_text('import barca\nbarca.get("broken", "pipeline.py")\n')
    import subprocess
    import sys

    from conftest import barca_env

    proc = subprocess.run([sys.executable, "uncaught.py"], cwd=project, env=barca_env(),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert 'raise ValueError("broken on purpose")' in proc.stderr
    assert "barca.errors.StepFailed: step 'pipeline.py:broken' failed" in proc.stderr


def test_collect_given_by_keyword_says_to_pass_the_asset_first(project: Path) -> None:
    write(project, {"pipeline.py": """
        from barca import asset, collect, partitions

        @asset(partitions={"k": partitions(["a", "b"])})
        def part(k: str) -> str:
            return k

        @asset(inputs={"parts": collect(asset_fn=part)})
        def fan(parts: list) -> list:
            return parts
    """})
    out = drive(project, """
import json
from barca import asset, collect, partitions

@asset(partitions={"k": partitions(["a"])})
def part(k: str) -> str:
    return k

try:
    collect(asset_fn=part)
except TypeError as exc:
    print(json.dumps(str(exc)))
""")
    assert out == ("collect() takes the partitioned upstream as its one positional argument, "
                   "not as asset_fn=: write collect(part)")
    refused = barca(project, "get", "fan", "pipeline.py").expect(2).envelope
    assert "collect(asset_fn=part)" in refused["error"]
    assert refused["remediation"] == "pass it as the first argument: collect(part)"


SORTED = """
    from barca import asset, collect, partitions, partitions_from

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={"region": partitions(["emea", "apac", "amer"])})
    def sales(region: str) -> str:
        _ran("sales " + region)
        return region.upper()

    @asset(inputs={"all": collect(sales)})
    def total(all: list) -> list:
        _ran("total")
        return all

    @asset()
    def shops() -> list:
        _ran("shops")
        return ["s2", "s10", "s1"]

    @asset(partitions={"shop": partitions_from(shops)})
    def stock(shop: str) -> str:
        _ran("stock " + shop)
        return shop

    @asset(inputs={"all": collect(stock)})
    def inventory(all: list) -> list:
        _ran("inventory")
        return all
"""


def test_collect_hands_its_list_sorted_by_key_so_reordering_keys_reruns_nothing(
        project: Path) -> None:
    write(project, {"pipeline.py": SORTED})
    both = ("get", "total,inventory", "pipeline.py", "--fields", "id,status,run_hash")
    first = barca(project, *both).expect(0).json
    assert first["targets"]["total"]["final_output"] == ["AMER", "APAC", "EMEA"]
    assert first["targets"]["inventory"]["final_output"] == ["s1", "s10", "s2"]  # as text
    take_executed(project)

    edit(project / "pipeline.py", '["emea", "apac", "amer"]', '["amer", "emea", "apac"]')
    edit(project / "pipeline.py", '["s2", "s10", "s1"]', '["s10", "s1", "s2"]')
    plan = barca(project, "get", "total,inventory", "pipeline.py", "--dry-run").expect(0).json
    assert {s["id"].split(":")[1]: s["action"] for s in plan["steps"]}["total"] == "cached"
    again = barca(project, *both).expect(0).json
    # only the list source reruns (its code changed); no key, and neither collect reader
    assert take_executed(project) == ["shops"]
    assert again["targets"]["total"]["final_output"] == ["AMER", "APAC", "EMEA"]
    assert again["targets"]["inventory"]["final_output"] == ["s1", "s10", "s2"]
    readers = ("pipeline.py:total", "pipeline.py:inventory")
    hashes = [{s["id"]: s["run_hash"] for s in run["steps"] if s["id"] in readers}
              for run in (first, again)]
    assert hashes[0] == hashes[1] and len(hashes[0]) == 2

    # a key added, or one recomputed, reruns the reader, still in key order
    edit(project / "pipeline.py", '["amer", "emea", "apac"]', '["amer", "emea", "apac", "afr"]')
    edit(project / "pipeline.py", 'return region.upper()', 'return region.upper() + "!"')
    last = barca(project, "get", "total", "pipeline.py").expect(0).json
    assert last["final_output"] == ["AFR!", "AMER!", "APAC!", "EMEA!"]


def test_a_parallel_branch_may_return_a_duckdb_relation(project: Path) -> None:
    write(project, {"pipeline.py": """
        import functools

        from barca import parallel, task

        def numbers(n: int):
            import duckdb
            return duckdb.sql(f"select range * 10 as x from range({n})")

        @task()
        def gather() -> list:
            tables = parallel(functools.partial(numbers, 2), functools.partial(numbers, 3))
            return [[type(t).__module__.split(".")[0], type(t).__name__,
                     t.column("x").to_pylist()] for t in tables]
    """})
    expected = [["pyarrow", "Table", [0, 10]], ["pyarrow", "Table", [0, 10, 20]]]
    ran = barca(project, "run", "gather", "pipeline.py", env={"BARCA_POOL_SIZE": "2"})
    assert ran.expect(0).json["final_output"] == expected
    # outside a worker the branches run here, and hand back the same type
    assert drive(project, """
import json, pipeline
print(json.dumps(pipeline.gather()))
""") == expected
