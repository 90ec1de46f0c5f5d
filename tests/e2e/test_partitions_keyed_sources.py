"""Keyed sources: a sensor (or asset) returning `{key: version}` read by `partitions_from`.

The first test is the user's seed example, unchanged, over a small DuckDB warehouse. The others
keep end to end against real workers a value a source may not return (the failed step's error
envelope), per-key caching: a key runs only when its own value (or its own upstream key)
changed, and a large source's file replaced on every tick without leaving the old one. The
three forms of `partitions_from`, the other rules for the dict a source returns and the rest
of per-key caching are tested at the driver level in tests/engine/test_keyed_rules.py.

Every partitioned function appends `<node> <key>` to `executed.log` when its body runs, so the
tests check what really executed as well as what barca reports.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import barca, lines, take_executed, write
from rule_pipelines.keyed import CHAIN, MODES, write_versions

# ---------------------------------------------------------------------------------------------
# The seed example (verbatim pipeline), over a warehouse.duckdb built in the test directory.

SEED_PIPELINE = (Path(__file__).resolve().parents[2] / "examples" / "keyed_partitions" /
                 "pipeline.py").read_text()  # the user's example, verbatim

RETAILERS = [f"r{i:06d}" for i in range(1, 7)]  # N = 6


def _warehouse(root: Path, rows: list[tuple[str, str]]) -> None:
    import duckdb

    con = duckdb.connect(str(root / "warehouse.duckdb"))
    try:
        con.execute("create table if not exists orders (retailer varchar, updated_at timestamp)")
        con.executemany("insert into orders values (?, ?)", rows)
    finally:
        con.close()


def _snapshot(root: Path) -> dict[str, str]:
    """Every file under .barca/ with the hash of its bytes."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / ".barca").rglob("*")) if p.is_file()}


def _runs(root: Path) -> list[dict]:
    return barca(root, "history", "--json").expect(0).json["runs"]


def test_seed_example_runs_every_key_then_only_the_retailer_whose_orders_changed(
        project: Path) -> None:
    write(project, {"pipeline.py": SEED_PIPELINE})
    _warehouse(project, [(r, f"2026-10-22 09:0{i}:00") for i, r in enumerate(RETAILERS)])
    n = len(RETAILERS)

    first = barca(project, "get", "scored", "pipeline.py").expect(0)
    assert first.json["steps_executed"] == 1 + 2 * n  # the sensor and every key of both
    labels = [f"retailer={r}" for r in RETAILERS]
    assert sorted(first.json["final_output"]) == labels
    assert first.json["final_output"]["retailer=r000002"] == {
        "retailer": "r000002", "rows": 1, "as_of": "2026-10-22 09:01:00", "score": 0.1}

    # one retailer's orders change: a new row with a later timestamp
    _warehouse(project, [("r000004", "2026-10-23 10:00:00")])
    before, runs_before = _snapshot(project), _runs(project)

    dry = barca(project, "get", "scored", "pipeline.py", "--dry-run").expect(0)
    cleaned, scored = dry.steps["cleaned"], dry.steps["scored"]
    for step, cause in ((cleaned, "value pipeline.py:retailer_versions"),
                        (scored, "input pipeline.py:cleaned")):
        assert step["action"] == "partial"
        assert step["partitions"]["total"] == n
        assert step["partitions"]["cached"] == n - 1
        assert step["partitions"]["will_run"] == 1
        assert step["partitions"]["will_run_keys"] == ["retailer=r000004"]
        assert step["partitions"]["changed"] == {"retailer=r000004": [cause]}
        assert f"will run: retailer=r000004 ({cause} changed)" in step["detail"]
    assert dry.json["summary"]["will_run"] == 3
    assert dry.json["summary"]["cached"] == 2 * n - 2
    # the dry run wrote nothing: no new run in history, no file added or changed
    assert _snapshot(project) == before
    assert _runs(project) == runs_before

    real = barca(project, "get", "scored", "pipeline.py").expect(0)
    assert real.json["steps_executed"] == 3
    assert real.statuses() == {"retailer_versions": "ran", "cleaned": "partial",
                               "scored": "partial"}
    assert real.json["final_output"]["retailer=r000004"]["rows"] == 2
    assert real.json["final_output"]["retailer=r000004"]["as_of"] == "2026-10-23 10:00:00"
    latest = _runs(project)[0]
    assert latest["run_id"] == real.json["run_id"]
    assert latest["steps_executed"] == 3
    assert latest["steps_cached"] == 2 * n - 2

    table = barca(project, "history", "--pretty", "--limit", "1").expect(0).stdout
    row = next(line for line in table.splitlines() if line.startswith(real.json["run_id"]))
    assert row.split()[4:6] == ["3", str(2 * n - 2)]  # STEPS, CACHED


def test_the_bundled_keyed_example_runs_as_its_docstring_says(tmp_path: Path) -> None:
    """examples/keyed_partitions/: build a warehouse, run, touch one retailer, run again."""
    example = Path(__file__).resolve().parents[2] / "examples" / "keyed_partitions"
    for name in ("pipeline.py", "warehouse.py"):
        shutil.copy(example / name, tmp_path / name)

    def warehouse(*args: str) -> str:
        done = subprocess.run([sys.executable, "warehouse.py", *args], cwd=tmp_path,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "20 retailers" in warehouse("build", "20")
    first = barca(tmp_path, "get", "scored", "pipeline.py").expect(0)
    assert first.json["steps_executed"] == 41
    assert first.json["final_output"]["retailer=r000010"]["rows"] == 3
    warehouse("touch", "r000010")
    dry = barca(tmp_path, "get", "scored", "pipeline.py", "--dry-run").expect(0)
    assert dry.steps["cleaned"]["partitions"]["will_run_keys"] == ["retailer=r000010"]
    tick = barca(tmp_path, "get", "scored", "pipeline.py").expect(0)
    assert tick.json["steps_executed"] == 3
    bad = subprocess.run([sys.executable, "warehouse.py", "build"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "warehouse.py build 10000" in bad.stderr


@pytest.fixture
def modes(project: Path) -> Path:
    return write(project, {"pipeline.py": MODES, "mode.txt": "good"})


# every case: tests/engine/test_keyed_rules.py
@pytest.mark.parametrize("mode, key", [("set", "2")])
def test_a_value_that_is_not_json_writable_fails_the_sensor_naming_the_key_and_keeps_state(
        modes: Path, mode: str, key: str) -> None:
    barca(modes, "get", "use", "pipeline.py").expect(0)
    (modes / "mode.txt").write_text(mode)

    bad = barca(modes, "get", "use", "pipeline.py").expect(1)
    assert bad.json["failed_node"] == "pipeline.py:src"
    assert f"key '{key}'" in bad.json["error"]
    assert bad.statuses()["use"] == "skipped"
    assert bad.envelope["kind"] == "step_failed"
    assert f"key '{key}'" in bad.envelope["error"]

    # the previous good state is kept: consumers still have their keys, all cached
    status = barca(modes, "status", "--json", "pipeline.py").expect(0).json
    use = next(n for n in status["nodes"] if n["name"] == "use")
    assert use["cache"]["state"] == "cached"
    assert use["partitions"]["total"] == 2 and use["partitions"]["cached"] == 2

    # and the next good run works: only the new key runs
    (modes / "mode.txt").write_text("good3")
    good = barca(modes, "get", "use", "pipeline.py").expect(0)
    assert good.json["final_output"] == {"k=1": "str:1:one", "k=2": "str:2:two",
                                         "k=3": "str:3:three"}
    assert good.steps["use"]["partitions"]["will_run_keys"] == ["k=3"]
    assert sorted(lines(modes / "executed.log")) == ["1", "2", "3"]


@pytest.fixture
def chain(project: Path) -> Path:
    write(project, {"pipeline.py": CHAIN})
    write_versions(project, '{"c": 1, "a": 1, "b": 1}')
    barca(project, "get", "summary", "pipeline.py").expect(0)
    assert take_executed(project) == ["cleaned a", "cleaned b", "cleaned c",
                                      "scored a", "scored b", "scored c", "summary"]
    return project


def test_an_unchanged_value_is_cached_and_so_is_everything_below_it(chain: Path) -> None:
    again = barca(chain, "get", "summary", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 1  # the sensor only
    assert again.statuses() == {"versions": "ran", "cleaned": "cached", "scored": "cached",
                                "summary": "cached"}
    assert take_executed(chain) == []

    write_versions(chain, '{"c": 1, "a": 1, "b": 2}')
    one = barca(chain, "get", "summary", "pipeline.py").expect(0)
    assert one.json["steps_executed"] == 4  # sensor, cleaned b, scored b, summary
    assert one.steps["cleaned"]["partitions"]["will_run_keys"] == ["k=b"]
    assert one.steps["cleaned"]["changed"] == ["value pipeline.py:versions"]
    assert one.steps["scored"]["changed"] == ["input pipeline.py:cleaned"]
    assert take_executed(chain) == ["cleaned b", "scored b", "summary"]
    assert one.json["final_output"] == ["a:1", "b:2", "c:1"]




def test_a_large_key_source_rewritten_each_tick_leaves_only_its_result(tmp_path: Path) -> None:
    """A sensor whose file is megabytes (30,000 keys) is replaced every tick; the worker frees
    the replaced file after its outcome is sent (store.local_files.set_aside), so nothing but
    the result stays in the sensor's directory, and the new value is what is read."""
    write(tmp_path, {"pipeline.py": """
        from pathlib import Path
        from barca import asset, partitions_from, sensor

        @sensor()
        def versions() -> dict:
            tick = Path("tick.txt").read_text()
            return {f"key{i:05d}": f"{tick}-version-{i:020d}" for i in range(30000)}

        @asset(partitions={"k": partitions_from(versions)})
        def per_key(k: str, versions: str) -> str:
            return versions
    """})
    for tick in ("first", "second"):
        (tmp_path / "tick.txt").write_text(tick)
        ran = barca(tmp_path, "get", "versions", "pipeline.py", "-o", "path").expect(0)
        path = tmp_path / ran.stdout.strip()
        assert path.stat().st_size > (1 << 20)
        assert path.read_bytes().startswith(b'{"keys":["key00000"')
        assert os.listdir(path.parent) == [path.name]
    value = barca(tmp_path, "get", "versions", "pipeline.py", "-o", "value").expect(0).json
    assert value["key29999"] == f"second-version-{29999:020d}"
