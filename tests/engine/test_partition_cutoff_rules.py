"""`@asset(cutoff=True)` above partitioned assets, and partitioned sensors, at the driver level
(moved from tests/e2e/test_partitions_cutoff_and_sensors.py, which keeps a cutoff global asset
and a partitioned sensor against real workers).

A cutoff asset returning `{key: version}` is a keyed source: only keys whose value changed
rerun; without cutoff every key reruns when it reruns. A reader of a partitioned sensor reruns
the key whose value changed; a partitioned cutoff asset reruns only the readers of keys whose
bytes changed.
"""

from __future__ import annotations

import pytest

from conftest import edit, take_executed, write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)
from rule_pipelines.partition_cutoff import CUTOFF, SENSORS


@pytest.fixture
def cutoff(engine: Engine) -> Engine:
    write(engine.root, {"pipeline.py": CUTOFF, "rates.txt": "5 first",
                        "manifest.json": '{"a": 1, "b": 1, "c": 1}'})
    return engine


def test_a_cutoff_asset_returning_key_versions_is_a_keyed_source(cutoff: Engine) -> None:
    root = cutoff.root
    cutoff.get("per", "pipeline.py").expect(0)
    assert take_executed(root) == ["keyed", "per a", "per b", "per c"]

    (root / "manifest.json").write_text('{"c": 1, "b": 2, "a": 1, "d": 0}')
    got = cutoff.get("per", "pipeline.py").expect(0)
    assert got.statuses()["keyed"] == "ran"
    assert got.steps["per"]["partitions"]["will_run_keys"] == ["k=b", "k=d"]
    assert got.steps["per"]["partitions"]["changed"] == {"k=b": ["value pipeline.py:keyed"]}
    assert take_executed(root) == ["keyed", "per b", "per d"]
    assert got.json["final_output"] == {"k=a": "a@1", "k=b": "b@2", "k=c": "c@1", "k=d": "d@0"}

    # keyed reruns (its sensor's text changed) and returns the same dict: no key reruns
    (root / "manifest.json").write_text('{"a": 1, "b": 2, "c": 1, "d": 0}')
    again = cutoff.get("per", "pipeline.py").expect(0)
    assert again.statuses() == {"manifest": "ran", "keyed": "ran", "per": "cached"}
    assert take_executed(root) == ["keyed"]


def test_a_dict_asset_without_cutoff_reruns_every_key_when_it_reruns(cutoff: Engine) -> None:
    root = cutoff.root
    edit(root / "pipeline.py", '@asset(inputs={"m": manifest}, cutoff=True)',
         '@asset(inputs={"m": manifest})')
    cutoff.get("per", "pipeline.py").expect(0)
    take_executed(root)
    (root / "manifest.json").write_text('{"a": 1, "b": 2, "c": 1}')
    got = cutoff.get("per", "pipeline.py").expect(0)
    assert got.steps["per"]["partitions"]["will_run"] == 3
    assert take_executed(root) == ["keyed", "per a", "per b", "per c"]


def test_a_reader_of_a_partitioned_sensor_reruns_the_key_whose_value_changed(
        engine: Engine) -> None:
    root = engine.root
    write(root, {"pipeline.py": SENSORS})
    engine.get("data", "pipeline.py").expect(0)
    take_executed(root)
    (root / "r2.txt").write_text("fresh")
    got = engine.get("data", "pipeline.py").expect(0)
    assert got.json["final_output"]["retailer=r2"] == "r2:fresh"
    assert got.steps["data"]["partitions"]["will_run_keys"] == ["retailer=r2"]
    assert take_executed(root) == ["data r2", "poll r1", "poll r2", "poll r3"]


PARTITIONED_CUTOFF = """
    import json
    from pathlib import Path
    from barca import asset, partitions_from, sensor

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)}, cutoff=True)
    def parity(k: str, versions: int) -> str:
        _ran("parity " + k)
        return "even" if versions % 2 == 0 else "odd"

    @asset(partitions={"k": partitions_from(parity)})
    def report(k: str, parity: str) -> str:
        _ran("report " + k)
        return k + " is " + parity
"""


def test_a_partitioned_cutoff_asset_reruns_readers_only_of_keys_whose_bytes_changed(
        engine: Engine) -> None:
    project = engine.root
    write(project, {"pipeline.py": PARTITIONED_CUTOFF,
                    "versions.json": '{"a": 1, "b": 2, "c": 3}'})
    engine.get("report", "pipeline.py").expect(0)
    take_executed(project)

    (project / "versions.json").write_text('{"a": 5, "b": 2, "c": 4}')  # a: same bytes
    got = engine.get("report", "pipeline.py").expect(0)
    assert take_executed(project) == ["parity a", "parity c", "report c"]
    assert got.json["final_output"] == {"k=a": "a is odd", "k=b": "b is even",
                                        "k=c": "c is even"}
    again = engine.get("report", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 1 and take_executed(project) == []

    (project / "versions.json").write_text('{"a": 6, "b": 2, "c": 4}')
    last = engine.get("report", "pipeline.py").expect(0)
    assert take_executed(project) == ["parity a", "report a"]
    assert last.json["final_output"]["k=a"] == "a is even"
