"""Keyed sources at the driver level (moved from tests/e2e/test_partitions_keyed_sources.py,
which keeps the seed example, the bundled example, a value that is not JSON-writable and an
unchanged value's cache hit against real workers): the three forms of `partitions_from`, the
rules for the dict a source returns, and per-key caching: a key runs only when its own value
(or its own upstream key) changed.

Every partitioned function appends `<node> <key>` to `executed.log` when its body runs, so the
tests check what really executed as well as what barca reports.
"""

from __future__ import annotations

import json

import pytest

from conftest import barca_here, edit, lines, take_executed, write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)
from rule_pipelines.keyed import CHAIN, MODES, write_versions

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
def forms(engine: Engine) -> Engine:
    write(engine.root, {"pipeline.py": FORMS,
                        "versions.json": '{"a": 1, "b": {"x": [1, 2]}, "c": null}',
                        "names.json": '["x", "y"]'})
    return engine


def test_partitions_from_a_partitioned_asset_gives_its_keys_and_that_keys_value(
        forms: Engine) -> None:
    got = forms.get("margin,margin_renamed", "pipeline.py").expect(0)
    margin = got.json["targets"]["margin"]["final_output"]
    assert margin == {"region=amer": {"of": {"region": "amer", "total": 4}, "margin": 8},
                      "region=emea": {"of": {"region": "emea", "total": 4}, "margin": 8}}
    renamed = got.json["targets"]["margin_renamed"]["final_output"]
    assert renamed == {"region=amer": "amer:amer", "region=emea": "emea:emea"}


@pytest.mark.parametrize("target, expected", [
    ("by_name", {"name=x": "name-x", "name=y": "name-y"}),      # a sensor returning a list
    ("by_id", {"id=1": "str:1", "id=2": "str:2", "id=3": "str:3"}),  # an asset; ints -> str
], ids=["sensor-list", "asset-list"])
def test_partitions_from_a_list_source_gives_keys_only(forms: Engine, target, expected) -> None:
    got = forms.get(target, "pipeline.py").expect(0)
    assert got.json["final_output"] == expected
    assert got.steps[target]["partitions"]["total"] == len(expected)


def test_partitions_from_a_dict_gives_each_key_only_its_own_value(forms: Engine) -> None:
    got = forms.get("per_key,per_key_renamed,key_only", "pipeline.py").expect(0)
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


@pytest.fixture
def modes(engine: Engine) -> Engine:
    write(engine.root, {"pipeline.py": MODES, "mode.txt": "good"})
    return engine


def test_int_keys_become_strings(modes: Engine) -> None:
    got = modes.get("use", "pipeline.py").expect(0)
    assert got.json["final_output"] == {"k=1": "str:1:one", "k=2": "str:2:two"}
    artifact = modes.root / ".barca" / "artifacts" / "pipeline.py--src"
    (stored,) = [json.loads(p.read_text()) for p in artifact.iterdir()]
    assert stored == {"keys": ["1", "2"], "values": ["one", "two"]}  # keyed-json, key order


@pytest.mark.parametrize("mode, key", [("set", "2"), ("nan", "oops"), ("object", "weird")])
def test_a_value_that_is_not_json_writable_fails_the_sensor_naming_the_key_and_keeps_state(
        modes: Engine, mode: str, key: str) -> None:
    root = modes.root
    modes.get("use", "pipeline.py").expect(0)
    (root / "mode.txt").write_text(mode)

    bad = modes.get("use", "pipeline.py").expect(1)
    assert bad.json["failed_node"] == "pipeline.py:src"
    assert f"key '{key}'" in bad.json["error"]
    assert bad.statuses()["use"] == "skipped"

    # the previous good state is kept: consumers still have their keys, all cached
    status = barca_here(root, "status", "--json", "pipeline.py").expect(0).json
    use = next(n for n in status["nodes"] if n["name"] == "use")
    assert use["cache"]["state"] == "cached"
    assert use["partitions"]["total"] == 2 and use["partitions"]["cached"] == 2

    # and the next good run works: only the new key runs
    (root / "mode.txt").write_text("good3")
    good = modes.get("use", "pipeline.py").expect(0)
    assert good.json["final_output"] == {"k=1": "str:1:one", "k=2": "str:2:two",
                                         "k=3": "str:3:three"}
    assert good.steps["use"]["partitions"]["will_run_keys"] == ["k=3"]
    assert sorted(lines(root / "executed.log")) == ["1", "2", "3"]


@pytest.mark.parametrize("mode, words", [("collide", "'1'"), ("bool", "True")])
def test_keys_that_are_not_str_or_int_or_collide_fail_the_sensor(modes: Engine, mode: str,
                                                                 words: str) -> None:
    (modes.root / "mode.txt").write_text(mode)
    bad = modes.get("use", "pipeline.py").expect(1)
    assert bad.json["failed_node"] == "pipeline.py:src"
    assert words in bad.json["error"]
    assert not (modes.root / "executed.log").exists()


@pytest.mark.xfail(strict=True, reason=(
    "BUG: a value holding an integer beyond 64 bits (2**70) is rejected as 'not "
    "JSON-writable (int)', though it is valid JSON and the 0.33 manual says such integers "
    "are hashed (compared as floats)"))
def test_a_big_integer_value_is_json_writable(modes: Engine) -> None:
    (modes.root / "mode.txt").write_text("bigint")
    got = modes.get("use", "pipeline.py").expect(0)
    assert got.json["final_output"] == {"k=1": f"str:1:{2 ** 70}"}


@pytest.fixture
def chain(engine: Engine) -> Engine:
    write(engine.root, {"pipeline.py": CHAIN})
    write_versions(engine.root, '{"c": 1, "a": 1, "b": 1}')
    engine.get("summary", "pipeline.py").expect(0)
    assert take_executed(engine.root) == ["cleaned a", "cleaned b", "cleaned c",
                                          "scored a", "scored b", "scored c", "summary"]
    return engine


def test_a_new_key_runs_only_that_key(chain: Engine) -> None:
    write_versions(chain.root, '{"c": 1, "a": 1, "b": 1, "d": 5}')
    got = chain.get("summary", "pipeline.py").expect(0)
    assert got.steps["cleaned"]["partitions"] == {
        "total": 4, "cached": 3, "will_run": 1, "will_run_keys": ["k=d"]}
    assert take_executed(chain.root) == ["cleaned d", "scored d", "summary"]
    assert got.json["final_output"] == ["a:1", "b:1", "c:1", "d:5"]


def test_a_removed_key_runs_nothing_and_is_no_longer_returned(chain: Engine) -> None:
    write_versions(chain.root, '{"c": 1, "a": 1}')
    got = chain.get("scored", "pipeline.py").expect(0)
    assert got.json["steps_executed"] == 1
    assert got.json["final_output"] == {"k=a": "a:1", "k=c": "c:1"}
    assert take_executed(chain.root) == []
    # a key that comes back with its old value is served from its kept artifact
    write_versions(chain.root, '{"c": 1, "a": 1, "b": 1}')
    back = chain.get("scored", "pipeline.py").expect(0)
    assert back.json["steps_executed"] == 1
    assert take_executed(chain.root) == []


def test_collect_gets_keys_in_sorted_order_and_reruns_on_add_remove_and_recompute(
        chain: Engine) -> None:
    """A dict source's order carries no meaning (a query's rows come in any order), so its
    keys are taken sorted: the same keys in another order change nothing."""
    def summary() -> tuple[str, list]:
        got = chain.get("summary", "pipeline.py").expect(0)
        return got.statuses()["summary"], got.json["final_output"]

    assert summary() == ("cached", ["a:1", "b:1", "c:1"])   # sorted, not the dict's order
    write_versions(chain.root, '{"b": 1, "c": 1, "a": 1}')
    assert summary() == ("cached", ["a:1", "b:1", "c:1"])   # reordered: nothing reruns
    write_versions(chain.root, '{"c": 1, "a": 1, "b": 1, "d": 1}')
    assert summary() == ("ran", ["a:1", "b:1", "c:1", "d:1"])   # added
    write_versions(chain.root, '{"c": 1, "a": 1, "d": 1}')
    assert summary() == ("ran", ["a:1", "c:1", "d:1"])          # removed
    write_versions(chain.root, '{"c": 1, "d": 1}')
    assert summary() == ("ran", ["c:1", "d:1"])                 # removed again
    write_versions(chain.root, '{"c": 1, "d": 2}')
    assert summary() == ("ran", ["c:1", "d:2"])                 # recomputed
    assert summary() == ("cached", ["c:1", "d:2"])
    assert take_executed(chain.root) == ["cleaned d", "cleaned d", "scored d", "scored d",
                                         "summary", "summary", "summary", "summary"]


def test_editing_the_sensor_code_reruns_every_key(chain: Engine) -> None:
    edit(chain.root / "pipeline.py", 'return json.loads(Path("versions.json").read_text())',
         'return dict(json.loads(Path("versions.json").read_text()))')
    got = chain.get("scored", "pipeline.py").expect(0)
    assert got.steps["cleaned"]["partitions"]["will_run"] == 3
    assert got.steps["cleaned"]["changed"] == ["sensor pipeline.py:versions"]
    assert got.steps["scored"]["partitions"]["will_run"] == 3
    assert take_executed(chain.root) == ["cleaned a", "cleaned b", "cleaned c",
                                         "scored a", "scored b", "scored c"]


def test_a_keys_value_is_hashed_as_canonical_json(chain: Engine) -> None:
    root = chain.root
    write_versions(root, '{"c": 1, "a": {"x": 1, "y": [1, {"p": 1, "q": 2}]}, "b": 1}')
    chain.get("scored", "pipeline.py").expect(0)
    assert take_executed(root) == ["cleaned a", "scored a"]
    # same values, every object written in another order, whitespace added
    write_versions(root, '{"b": 1,\n "a": {"y": [1, {"q": 2, "p": 1}], "x": 1},\n "c": 1}')
    got = chain.get("scored", "pipeline.py").expect(0)
    assert got.json["steps_executed"] == 1
    assert got.statuses() == {"versions": "ran", "cleaned": "cached", "scored": "cached"}
    assert take_executed(root) == []
    # a list's order is part of the value
    write_versions(root, '{"b": 1, "a": {"y": [{"q": 2, "p": 1}, 1], "x": 1}, "c": 1}')
    moved = chain.get("scored", "pipeline.py").expect(0)
    assert moved.steps["cleaned"]["partitions"]["will_run_keys"] == ["k=a"]
    assert take_executed(root) == ["cleaned a", "scored a"]


def test_an_empty_source_gives_no_keys_and_collect_receives_an_empty_list(
        chain: Engine) -> None:
    write_versions(chain.root, "{}")
    got = chain.get("summary", "pipeline.py").expect(0)
    assert got.json["final_output"] == []
    assert got.steps["cleaned"]["partitions"]["total"] == 0
    assert take_executed(chain.root) == ["summary"]
    write_versions(chain.root, '{"a": 1}')              # a key comes back: served from cache
    back = chain.get("summary", "pipeline.py").expect(0)
    assert back.json["final_output"] == ["a:1"]
    assert take_executed(chain.root) == ["summary"]


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
        engine: Engine) -> None:
    """The source is stored in key order (keyed-json) and its digest is taken in that order, so a
    query returning its rows in another order reruns nothing; readers get the dict in key order."""
    project = engine.root
    write(project, {"pipeline.py": WHOLE})
    write_versions(project, '{"c": 1, "a": {"x": 1, "y": 2}, "b": 1}')
    first = engine.get("everything", "pipeline.py").expect(0)
    assert first.json["final_output"] == [["a", {"x": 1, "y": 2}], ["b", 1], ["c", 1]]
    assert take_executed(project) == ["everything"]

    write_versions(project, '{"b": 1, "a": {"y": 2, "x": 1}, "c": 1}')
    again = engine.get("everything", "pipeline.py").expect(0)
    assert again.statuses()["everything"] == "cached"
    assert take_executed(project) == []

    write_versions(project, '{"b": 2, "a": {"y": 2, "x": 1}, "c": 1}')
    changed = engine.get("everything", "pipeline.py").expect(0)
    assert changed.statuses()["everything"] == "ran"
    assert changed.json["final_output"] == [["a", {"x": 1, "y": 2}], ["b", 2], ["c", 1]]
    assert take_executed(project) == ["everything"]

    whole = engine.get("versions", "pipeline.py").expect(0)
    assert list(whole.json["final_output"].items()) == [("a", {"x": 1, "y": 2}), ("b", 2),
                                                        ("c", 1)]
    rows = barca_here(project, "sql", "select key, value from versions order by key desc",
                      "pipeline.py", "--json").expect(0).json["rows"]
    assert [row["key"] for row in rows] == ["c", "b", "a"]
    assert json.loads(rows[1]["value"]) == 2 and json.loads(rows[2]["value"]) == {"x": 1, "y": 2}
