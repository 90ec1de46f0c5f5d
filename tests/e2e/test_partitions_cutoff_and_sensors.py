"""`@asset(cutoff=True)` above partitioned assets, and partitioned sensors.

A global asset every key reads reruns every key when it reruns, unless it is `cutoff=True` and
wrote the same bytes. A cutoff asset returning `{key: version}` is a keyed source: only keys
whose value changed rerun. A partitioned sensor runs once per key on every run.

End to end against real workers: a cutoff global asset and a partitioned sensor. The keyed
cutoff source, a dict asset without cutoff, a partitioned sensor's reader and a partitioned
cutoff asset are tested at the driver level in tests/engine/test_partition_cutoff_rules.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, take_executed, write
from rule_pipelines.partition_cutoff import CUTOFF, SENSORS


@pytest.fixture
def cutoff(project: Path) -> Path:
    return write(project, {"pipeline.py": CUTOFF, "rates.txt": "5 first",
                           "manifest.json": '{"a": 1, "b": 1, "c": 1}'})


def test_a_cutoff_global_asset_that_writes_the_same_bytes_reruns_no_key(cutoff: Path) -> None:
    first = barca(cutoff, "get", "report", "pipeline.py").expect(0)
    assert first.json["final_output"] == {"region=amer": "AMER:5", "region=apac": "APAC:5",
                                          "region=emea": "EMEA:5"}
    take_executed(cutoff)

    (cutoff / "rates.txt").write_text("5 second")       # rates reruns, same bytes
    same = barca(cutoff, "get", "report", "pipeline.py").expect(0)
    assert same.statuses() == {"rates_file": "ran", "rates": "ran", "priced": "cached",
                               "report": "cached"}
    assert take_executed(cutoff) == ["rates"]

    (cutoff / "rates.txt").write_text("6 third")        # new bytes: every key reruns
    new = barca(cutoff, "get", "report", "pipeline.py").expect(0)
    assert new.steps["priced"]["partitions"]["will_run"] == 3
    assert new.steps["priced"]["changed"] == ["input pipeline.py:rates"]
    assert take_executed(cutoff) == ["priced amer", "priced apac", "priced emea", "rates",
                                     "report amer", "report apac", "report emea"]
    assert new.json["final_output"]["region=emea"] == "EMEA:6"


@pytest.fixture
def sensors(project: Path) -> Path:
    return write(project, {"pipeline.py": SENSORS})


def test_a_partitioned_sensor_runs_once_per_key_on_every_run(sensors: Path) -> None:
    first = barca(sensors, "get", "data", "pipeline.py").expect(0)
    assert first.json["steps_executed"] == 6
    assert take_executed(sensors) == ["data r1", "data r2", "data r3",
                                      "poll r1", "poll r2", "poll r3"]
    for _ in range(2):
        again = barca(sensors, "get", "data", "pipeline.py").expect(0)
        assert again.json["steps_executed"] == 3
        assert again.steps["poll"]["status"] == "ran"
        assert again.steps["poll"]["partitions"]["will_run"] == 3
        assert again.steps["data"]["status"] == "cached"
        assert take_executed(sensors) == ["poll r1", "poll r2", "poll r3"]
    latest = barca(sensors, "history", "--json").expect(0).json["runs"][0]
    assert (latest["steps_executed"], latest["steps_cached"]) == (3, 3)


