"""Keyed sources: a sensor (or asset) returning `{key: version}` read by `partitions_from`.

The first test is the user's seed example, unchanged, over a small DuckDB warehouse. The others
pin down the three forms of `partitions_from`, the rules for the dict a source returns, and
per-key caching: a key runs only when its own value (or its own upstream key) changed.

Every partitioned function appends `<node> <key>` to `executed.log` when its body runs, so the
tests check what really executed as well as what barca reports.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import barca, edit, lines, take_executed, write

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


# ---------------------------------------------------------------------------------------------
# The three forms of partitions_from

FORMS = """
    import json
    from pathlib import Path
    from barca import asset, partitions, partitions_from, sensor

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @sensor()
    def names() -> list:
        return json.loads(Path("names.json").read_text())

    @asset()
    def ids() -> list:
        return [3, 1, 2]

    @asset(partitions={"region": partitions(["emea", "amer"])})
    def sales(region: str) -> dict:
        return {"region": region, "total": len(region)}

    @asset(partitions={"region": partitions_from(sales)})
    def margin(region: str, sales: dict) -> dict:
        return {"of": sales, "margin": sales["total"] * 2}

    @asset(partitions={"region": partitions_from(sales)}, inputs={"s": sales})
    def margin_renamed(region: str, s: dict) -> str:
        return f"{region}:{s['region']}"

    @asset(partitions={"k": partitions_from(versions)})
    def per_key(k: str, versions) -> dict:
        return {"k": k, "v": versions}

    @asset(partitions={"k": partitions_from(versions)}, inputs={"ver": versions})
    def per_key_renamed(k: str, ver) -> dict:
        return {"k": k, "ver": ver}

    @asset(partitions={"k": partitions_from(versions)})
    def key_only(k: str) -> str:
        return "only-" + k

    @asset(partitions={"name": partitions_from(names)})
    def by_name(name: str) -> str:
        return "name-" + name

    @asset(partitions={"id": partitions_from(ids)})
    def by_id(id: str) -> str:
        return f"{type(id).__name__}:{id}"
"""


@pytest.fixture
def forms(project: Path) -> Path:
    write(project, {"pipeline.py": FORMS,
                    "versions.json": '{"a": 1, "b": {"x": [1, 2]}, "c": null}',
                    "names.json": '["x", "y"]'})
    return project


def test_partitions_from_a_partitioned_asset_gives_its_keys_and_that_keys_value(
        forms: Path) -> None:
    got = barca(forms, "get", "margin,margin_renamed", "pipeline.py").expect(0)
    margin = got.json["targets"]["margin"]["final_output"]
    assert margin == {"region=amer": {"of": {"region": "amer", "total": 4}, "margin": 8},
                      "region=emea": {"of": {"region": "emea", "total": 4}, "margin": 8}}
    renamed = got.json["targets"]["margin_renamed"]["final_output"]
    assert renamed == {"region=amer": "amer:amer", "region=emea": "emea:emea"}


@pytest.mark.parametrize("target, expected", [
    ("by_name", {"name=x": "name-x", "name=y": "name-y"}),      # a sensor returning a list
    ("by_id", {"id=1": "str:1", "id=2": "str:2", "id=3": "str:3"}),  # an asset; ints -> str
], ids=["sensor-list", "asset-list"])
def test_partitions_from_a_list_source_gives_keys_only(forms: Path, target, expected) -> None:
    got = barca(forms, "get", target, "pipeline.py").expect(0)
    assert got.json["final_output"] == expected
    assert got.steps[target]["partitions"]["total"] == len(expected)


def test_partitions_from_a_dict_gives_each_key_only_its_own_value(forms: Path) -> None:
    got = barca(forms, "get", "per_key,per_key_renamed,key_only", "pipeline.py").expect(0)
    targets = got.json["targets"]
    assert targets["per_key"]["final_output"] == {
        "k=a": {"k": "a", "v": 1}, "k=b": {"k": "b", "v": {"x": [1, 2]}},
        "k=c": {"k": "c", "v": None}}
    assert targets["per_key_renamed"]["final_output"] == {
        "k=a": {"k": "a", "ver": 1}, "k=b": {"k": "b", "ver": {"x": [1, 2]}},
        "k=c": {"k": "c", "ver": None}}
    # without a parameter named like the source, only the key is passed
    assert targets["key_only"]["final_output"] == {"k=a": "only-a", "k=b": "only-b",
                                                   "k=c": "only-c"}


# ---------------------------------------------------------------------------------------------
# What a keyed source may return

MODES = """
    from pathlib import Path
    from barca import asset, partitions_from, sensor

    @sensor()
    def src() -> dict:
        mode = Path("mode.txt").read_text().strip()
        if mode == "good":
            return {1: "one", 2: "two"}
        if mode == "good3":
            return {1: "one", 2: "two", 3: "three"}
        if mode == "set":
            return {1: "one", 2: {"not", "json"}}
        if mode == "nan":
            return {1: "one", "oops": float("nan")}
        if mode == "object":
            return {1: "one", "weird": object()}
        if mode == "collide":
            return {1: "one", "1": "uno"}
        if mode == "bool":
            return {True: "yes"}
        if mode == "bigint":
            return {1: 2 ** 70}

    @asset(partitions={"k": partitions_from(src)})
    def use(k: str, src) -> str:
        with open("executed.log", "a") as fh:
            fh.write(k + "\\n")
        return f"{type(k).__name__}:{k}:{src}"
"""


@pytest.fixture
def modes(project: Path) -> Path:
    return write(project, {"pipeline.py": MODES, "mode.txt": "good"})


def test_int_keys_become_strings(modes: Path) -> None:
    got = barca(modes, "get", "use", "pipeline.py").expect(0)
    assert got.json["final_output"] == {"k=1": "str:1:one", "k=2": "str:2:two"}
    artifact = modes / ".barca" / "artifacts" / "pipeline.py--src"
    (stored,) = [json.loads(p.read_text()) for p in artifact.iterdir()]
    assert stored == {"keys": ["1", "2"], "values": ["one", "two"]}  # keyed-json, key order


@pytest.mark.parametrize("mode, key", [("set", "2"), ("nan", "oops"), ("object", "weird")])
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


@pytest.mark.parametrize("mode, words", [("collide", "'1'"), ("bool", "True")])
def test_keys_that_are_not_str_or_int_or_collide_fail_the_sensor(modes: Path, mode: str,
                                                                 words: str) -> None:
    (modes / "mode.txt").write_text(mode)
    bad = barca(modes, "get", "use", "pipeline.py").expect(1)
    assert bad.json["failed_node"] == "pipeline.py:src"
    assert words in bad.json["error"]
    assert not (modes / "executed.log").exists()


@pytest.mark.xfail(strict=True, reason=(
    "BUG: a value holding an integer beyond 64 bits (2**70) is rejected as 'not "
    "JSON-writable (int)', though it is valid JSON and the 0.33 manual says such integers "
    "are hashed (compared as floats)"))
def test_a_big_integer_value_is_json_writable(modes: Path) -> None:
    (modes / "mode.txt").write_text("bigint")
    got = barca(modes, "get", "use", "pipeline.py").expect(0)
    assert got.json["final_output"] == {"k=1": f"str:1:{2 ** 70}"}


# ---------------------------------------------------------------------------------------------
# Per-key caching

CHAIN = """
    import json
    from pathlib import Path
    from barca import asset, collect, partitions_from, sensor

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)})
    def cleaned(k: str, versions) -> dict:
        _ran("cleaned " + k)
        return {"k": k, "v": versions}

    @asset(partitions={"k": partitions_from(cleaned)})
    def scored(k: str, cleaned: dict) -> str:
        _ran("scored " + k)
        return f"{k}:{json.dumps(cleaned['v'], sort_keys=True)}"

    @asset(inputs={"all": collect(scored)})
    def summary(all: list) -> list:
        _ran("summary")
        return all
"""


def _versions(root: Path, text: str) -> None:
    (root / "versions.json").write_text(text)


@pytest.fixture
def chain(project: Path) -> Path:
    write(project, {"pipeline.py": CHAIN})
    _versions(project, '{"c": 1, "a": 1, "b": 1}')
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

    _versions(chain, '{"c": 1, "a": 1, "b": 2}')
    one = barca(chain, "get", "summary", "pipeline.py").expect(0)
    assert one.json["steps_executed"] == 4  # sensor, cleaned b, scored b, summary
    assert one.steps["cleaned"]["partitions"]["will_run_keys"] == ["k=b"]
    assert one.steps["cleaned"]["changed"] == ["value pipeline.py:versions"]
    assert one.steps["scored"]["changed"] == ["input pipeline.py:cleaned"]
    assert take_executed(chain) == ["cleaned b", "scored b", "summary"]
    assert one.json["final_output"] == ["a:1", "b:2", "c:1"]


def test_a_new_key_runs_only_that_key(chain: Path) -> None:
    _versions(chain, '{"c": 1, "a": 1, "b": 1, "d": 5}')
    got = barca(chain, "get", "summary", "pipeline.py").expect(0)
    assert got.steps["cleaned"]["partitions"] == {
        "total": 4, "cached": 3, "will_run": 1, "will_run_keys": ["k=d"]}
    assert take_executed(chain) == ["cleaned d", "scored d", "summary"]
    assert got.json["final_output"] == ["a:1", "b:1", "c:1", "d:5"]


def test_a_removed_key_runs_nothing_and_is_no_longer_returned(chain: Path) -> None:
    _versions(chain, '{"c": 1, "a": 1}')
    got = barca(chain, "get", "scored", "pipeline.py").expect(0)
    assert got.json["steps_executed"] == 1
    assert got.json["final_output"] == {"k=a": "a:1", "k=c": "c:1"}
    assert take_executed(chain) == []
    # a key that comes back with its old value is served from its kept artifact
    _versions(chain, '{"c": 1, "a": 1, "b": 1}')
    back = barca(chain, "get", "scored", "pipeline.py").expect(0)
    assert back.json["steps_executed"] == 1
    assert take_executed(chain) == []


def test_collect_gets_keys_in_sorted_order_and_reruns_on_add_remove_and_recompute(
        chain: Path) -> None:
    """A dict source's order carries no meaning (a query's rows come in any order), so its
    keys are taken sorted: the same keys in another order change nothing."""
    def summary() -> tuple[str, list]:
        got = barca(chain, "get", "summary", "pipeline.py").expect(0)
        return got.statuses()["summary"], got.json["final_output"]

    assert summary() == ("cached", ["a:1", "b:1", "c:1"])   # sorted, not the dict's order
    _versions(chain, '{"b": 1, "c": 1, "a": 1}')
    assert summary() == ("cached", ["a:1", "b:1", "c:1"])   # reordered: nothing reruns
    _versions(chain, '{"c": 1, "a": 1, "b": 1, "d": 1}')
    assert summary() == ("ran", ["a:1", "b:1", "c:1", "d:1"])   # added
    _versions(chain, '{"c": 1, "a": 1, "d": 1}')
    assert summary() == ("ran", ["a:1", "c:1", "d:1"])          # removed
    _versions(chain, '{"c": 1, "d": 1}')
    assert summary() == ("ran", ["c:1", "d:1"])                 # removed again
    _versions(chain, '{"c": 1, "d": 2}')
    assert summary() == ("ran", ["c:1", "d:2"])                 # recomputed
    assert summary() == ("cached", ["c:1", "d:2"])
    assert take_executed(chain) == ["cleaned d", "cleaned d", "scored d", "scored d",
                                    "summary", "summary", "summary", "summary"]


def test_editing_the_sensor_code_reruns_every_key(chain: Path) -> None:
    edit(chain / "pipeline.py", 'return json.loads(Path("versions.json").read_text())',
         'return dict(json.loads(Path("versions.json").read_text()))')
    got = barca(chain, "get", "scored", "pipeline.py").expect(0)
    assert got.steps["cleaned"]["partitions"]["will_run"] == 3
    assert got.steps["cleaned"]["changed"] == ["sensor pipeline.py:versions"]
    assert got.steps["scored"]["partitions"]["will_run"] == 3
    assert take_executed(chain) == ["cleaned a", "cleaned b", "cleaned c",
                                    "scored a", "scored b", "scored c"]


def test_a_keys_value_is_hashed_as_canonical_json(chain: Path) -> None:
    _versions(chain, '{"c": 1, "a": {"x": 1, "y": [1, {"p": 1, "q": 2}]}, "b": 1}')
    barca(chain, "get", "scored", "pipeline.py").expect(0)
    assert take_executed(chain) == ["cleaned a", "scored a"]
    # same values, every object written in another order, whitespace added
    _versions(chain, '{"b": 1,\n "a": {"y": [1, {"q": 2, "p": 1}], "x": 1},\n "c": 1}')
    got = barca(chain, "get", "scored", "pipeline.py").expect(0)
    assert got.json["steps_executed"] == 1
    assert got.statuses() == {"versions": "ran", "cleaned": "cached", "scored": "cached"}
    assert take_executed(chain) == []
    # a list's order is part of the value
    _versions(chain, '{"b": 1, "a": {"y": [{"q": 2, "p": 1}, 1], "x": 1}, "c": 1}')
    moved = barca(chain, "get", "scored", "pipeline.py").expect(0)
    assert moved.steps["cleaned"]["partitions"]["will_run_keys"] == ["k=a"]
    assert take_executed(chain) == ["cleaned a", "scored a"]


def test_an_empty_source_gives_no_keys_and_collect_receives_an_empty_list(chain: Path) -> None:
    _versions(chain, "{}")
    got = barca(chain, "get", "summary", "pipeline.py").expect(0)
    assert got.json["final_output"] == []
    assert got.steps["cleaned"]["partitions"]["total"] == 0
    assert take_executed(chain) == ["summary"]
    _versions(chain, '{"a": 1}')                       # a key comes back: served from cache
    back = barca(chain, "get", "summary", "pipeline.py").expect(0)
    assert back.json["final_output"] == ["a:1"]
    assert take_executed(chain) == ["summary"]


WHOLE = """
    import json
    from pathlib import Path
    from barca import asset, partitions_from, sensor

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)})
    def cleaned(k: str, versions) -> str:
        return k

    @asset(inputs={"versions": versions})
    def everything(versions: dict) -> list:
        with open("executed.log", "a") as fh:
            fh.write("everything\\n")
        return list(versions.items())
"""


def test_a_reader_of_the_whole_source_is_cached_when_only_the_order_of_its_rows_changes(
        project: Path) -> None:
    """The source is stored in key order (keyed-json) and its digest is taken in that order, so a
    query returning its rows in another order reruns nothing; readers get the dict in key order."""
    write(project, {"pipeline.py": WHOLE})
    _versions(project, '{"c": 1, "a": {"x": 1, "y": 2}, "b": 1}')
    first = barca(project, "get", "everything", "pipeline.py").expect(0)
    assert first.json["final_output"] == [["a", {"x": 1, "y": 2}], ["b", 1], ["c", 1]]
    assert take_executed(project) == ["everything"]

    _versions(project, '{"b": 1, "a": {"y": 2, "x": 1}, "c": 1}')
    again = barca(project, "get", "everything", "pipeline.py").expect(0)
    assert again.statuses()["everything"] == "cached"
    assert take_executed(project) == []

    _versions(project, '{"b": 2, "a": {"y": 2, "x": 1}, "c": 1}')
    changed = barca(project, "get", "everything", "pipeline.py").expect(0)
    assert changed.statuses()["everything"] == "ran"
    assert changed.json["final_output"] == [["a", {"x": 1, "y": 2}], ["b", 2], ["c", 1]]
    assert take_executed(project) == ["everything"]

    whole = barca(project, "get", "versions", "pipeline.py").expect(0)
    assert list(whole.json["final_output"].items()) == [("a", {"x": 1, "y": 2}), ("b", 2),
                                                        ("c", 1)]
    rows = barca(project, "sql", "select key, value from versions order by key desc",
                 "pipeline.py", "--json").expect(0).json["rows"]
    assert [row["key"] for row in rows] == ["c", "b", "a"]
    assert json.loads(rows[1]["value"]) == 2 and json.loads(rows[2]["value"]) == {"x": 1, "y": 2}
