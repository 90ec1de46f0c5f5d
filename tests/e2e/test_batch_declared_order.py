"""A keyed source's declared key order is its dict order (seed 002, `barca docs batch`,
"Choosing the grouping"; issue 29), on the real CLI.

Covered: batch=2 over a sensor returning {"z", "a", "m", "b"} calls [z, a] then [m, b], and a
`partitions_from` reader of that asset groups in the same order; the dry run lists the keys
that will run in that order; a reorder of the dict alone reruns nothing (no run hash changes,
a `collect` reader stays cached and keeps its list sorted by key); after a reorder the keys
that changed run in the new order; `--partition` narrows and keeps the order; a
`cutoff=True` asset returning the dict keeps its order when it is served from cache and a
reader's keys run again.

Batch functions append `[node, keys]` to calls.log (tests/conftest.py `take_calls`): calls of
a node may run in parallel, so the calls are compared as a sorted list, each call's own key
order kept.
"""

from __future__ import annotations

from pathlib import Path

from conftest import barca, edit, take_calls, write

LOG_CALL = """
    import json

    def _call(node, keys):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps([node, keys]) + "\\n")
"""

SENSOR = LOG_CALL + """
    from barca import asset, collect, partitions_from, sensor

    @sensor
    def versions() -> dict:
        return json.load(open("versions.json"))

    @asset(partitions={"k": partitions_from(versions)}, batch=2)
    def cleaned(k: list[str], versions: dict) -> dict:
        _call("cleaned", k)
        return {key: key + "@" + versions[key] for key in k}

    @asset(partitions={"k": partitions_from(cleaned)}, batch=2)
    def scored(k: list[str], cleaned: dict) -> dict:
        _call("scored", k)
        return {key: cleaned[key] + "!" for key in k}

    @asset(inputs={"all_scored": collect(scored)})
    def summary(all_scored: list) -> list:
        _call("summary", all_scored)
        return all_scored
"""


def versions(project: Path, pairs: list[tuple[str, str]]) -> None:
    """The sensor's dict, written in this order (JSON objects keep their order)."""
    body = ", ".join(f'"{k}": "{v}"' for k, v in pairs)
    (project / "versions.json").write_text("{" + body + "}")


def test_batches_of_a_keyed_sensor_follow_its_dict_order(project: Path) -> None:
    write(project, {"pipeline.py": SENSOR})
    versions(project, [("z", "1"), ("a", "1"), ("m", "1"), ("b", "1")])
    dry = barca(project, "get", "summary", "pipeline.py", "--dry-run").expect(0).json
    cleaned = next(s for s in dry["steps"] if s["id"] == "pipeline.py:cleaned")
    assert cleaned["partitions"]["will_run_keys"] == ["k=z", "k=a", "k=m", "k=b"]
    got = barca(project, "get", "summary", "pipeline.py").expect(0)
    calls = take_calls(project)
    assert calls["cleaned"] == [["m", "b"], ["z", "a"]]
    assert calls["scored"] == [["m", "b"], ["z", "a"]]
    # collect() hands its reader the list sorted by key, whatever the declared order
    assert calls["summary"] == [["a@1!", "b@1!", "m@1!", "z@1!"]]
    assert got.json["final_output"] == ["a@1!", "b@1!", "m@1!", "z@1!"]


def test_a_reorder_alone_reruns_nothing_and_changed_keys_run_in_the_new_order(
        project: Path) -> None:
    write(project, {"pipeline.py": SENSOR})
    versions(project, [("z", "1"), ("a", "1"), ("m", "1"), ("b", "1")])
    barca(project, "get", "summary", "pipeline.py").expect(0)
    take_calls(project)

    versions(project, [("b", "1"), ("m", "1"), ("a", "1"), ("z", "1")])
    dry = barca(project, "get", "summary", "pipeline.py", "--dry-run").expect(0).json
    # every key keeps its run hash: nothing but the sensor (which always runs) would run
    assert [s["id"] for s in dry["steps"] if s["action"] != "cached"] == \
        ["pipeline.py:versions"]
    barca(project, "get", "summary", "pipeline.py").expect(0)
    assert take_calls(project) == {}

    # two values change; the dict's order puts z before a
    versions(project, [("m", "1"), ("z", "2"), ("b", "1"), ("a", "2")])
    dry = barca(project, "get", "summary", "pipeline.py", "--dry-run").expect(0).json
    cleaned = next(s for s in dry["steps"] if s["id"] == "pipeline.py:cleaned")
    assert cleaned["partitions"]["will_run_keys"] == ["k=z", "k=a"]
    got = barca(project, "get", "summary", "pipeline.py").expect(0)
    calls = take_calls(project)
    assert calls["cleaned"] == [["z", "a"]]
    assert calls["scored"] == [["z", "a"]]
    assert got.json["final_output"] == ["a@2!", "b@1!", "m@1!", "z@2!"]



def test_partition_narrows_and_keeps_the_dict_order(project: Path) -> None:
    write(project, {"pipeline.py": SENSOR})
    versions(project, [("z", "1"), ("a", "1"), ("m", "1"), ("b", "1")])
    barca(project, "get", "scored", "pipeline.py", "--partition", "k=b,z",
          "--batch", "all").expect(0)
    assert take_calls(project) == {"cleaned": [["z", "b"]], "scored": [["z", "b"]]}


CUTOFF = LOG_CALL + """
    from barca import asset, partitions_from

    @asset(cutoff=True)
    def versions() -> dict:
        return {"z": "1", "a": "1", "m": "1", "b": "1"}

    @asset(partitions={"k": partitions_from(versions)}, batch=2)
    def cleaned(k: list[str], versions: dict) -> dict:
        _call("cleaned", k)
        return {key: key + "@" + versions[key] for key in k}
"""


def test_a_cached_cutoff_source_keeps_its_dict_order(project: Path) -> None:
    pipeline = write(project, {"pipeline.py": CUTOFF}) / "pipeline.py"
    barca(project, "get", "cleaned", "pipeline.py").expect(0)
    assert take_calls(project) == {"cleaned": [["m", "b"], ["z", "a"]]}
    # the source is served from cache; its keys (and their order) come from its stored result
    edit(pipeline, 'key + "@"', 'key + "#"')
    dry = barca(project, "get", "cleaned", "pipeline.py", "--dry-run").expect(0).json
    steps = {s["id"]: s for s in dry["steps"]}
    assert steps["pipeline.py:versions"]["action"] == "cached"
    assert steps["pipeline.py:cleaned"]["partitions"]["will_run_keys"] == \
        ["k=z", "k=a", "k=m", "k=b"]
    barca(project, "get", "cleaned", "pipeline.py").expect(0)
    assert take_calls(project) == {"cleaned": [["m", "b"], ["z", "a"]]}
