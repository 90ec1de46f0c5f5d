"""`@asset(cutoff=True)` above partitioned assets, and partitioned sensors.

A global asset every key reads reruns every key when it reruns, unless it is `cutoff=True` and
wrote the same bytes. A cutoff asset returning `{key: version}` is a keyed source: only keys
whose value changed rerun. A partitioned sensor runs once per key on every run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, edit, take_executed, write

CUTOFF = """
    import json
    from pathlib import Path
    from barca import asset, partitions, partitions_from, sensor

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @sensor()
    def rates_file() -> str:
        return Path("rates.txt").read_text()

    @asset(inputs={"raw": rates_file}, cutoff=True)
    def rates(raw: str) -> dict:
        _ran("rates")
        return {"rate": int(raw.split()[0])}          # the comment after the rate is dropped

    @asset(partitions={"region": partitions(["emea", "amer", "apac"])}, inputs={"rates": rates})
    def priced(region: str, rates: dict) -> str:
        _ran("priced " + region)
        return f"{region}:{rates['rate']}"

    @asset(partitions={"region": partitions_from(priced)})
    def report(region: str, priced: str) -> str:
        _ran("report " + region)
        return priced.upper()

    @sensor()
    def manifest() -> str:
        return Path("manifest.json").read_text()

    @asset(inputs={"m": manifest}, cutoff=True)
    def keyed(m: str) -> dict:
        _ran("keyed")
        return json.loads(m)

    @asset(partitions={"k": partitions_from(keyed)})
    def per(k: str, keyed) -> str:
        _ran("per " + k)
        return f"{k}@{keyed}"
"""


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


def test_a_cutoff_asset_returning_key_versions_is_a_keyed_source(cutoff: Path) -> None:
    barca(cutoff, "get", "per", "pipeline.py").expect(0)
    assert take_executed(cutoff) == ["keyed", "per a", "per b", "per c"]

    (cutoff / "manifest.json").write_text('{"c": 1, "b": 2, "a": 1, "d": 0}')
    got = barca(cutoff, "get", "per", "pipeline.py").expect(0)
    assert got.statuses()["keyed"] == "ran"
    assert got.steps["per"]["partitions"]["will_run_keys"] == ["k=b", "k=d"]
    assert got.steps["per"]["partitions"]["changed"] == {"k=b": ["value pipeline.py:keyed"]}
    assert take_executed(cutoff) == ["keyed", "per b", "per d"]
    assert got.json["final_output"] == {"k=a": "a@1", "k=b": "b@2", "k=c": "c@1", "k=d": "d@0"}

    # keyed reruns (its sensor's text changed) and returns the same dict: no key reruns
    (cutoff / "manifest.json").write_text('{"a": 1, "b": 2, "c": 1, "d": 0}')
    again = barca(cutoff, "get", "per", "pipeline.py").expect(0)
    assert again.statuses() == {"manifest": "ran", "keyed": "ran", "per": "cached"}
    assert take_executed(cutoff) == ["keyed"]


def test_a_dict_asset_without_cutoff_reruns_every_key_when_it_reruns(cutoff: Path) -> None:
    edit(cutoff / "pipeline.py", '@asset(inputs={"m": manifest}, cutoff=True)',
         '@asset(inputs={"m": manifest})')
    barca(cutoff, "get", "per", "pipeline.py").expect(0)
    take_executed(cutoff)
    (cutoff / "manifest.json").write_text('{"a": 1, "b": 2, "c": 1}')
    got = barca(cutoff, "get", "per", "pipeline.py").expect(0)
    assert got.steps["per"]["partitions"]["will_run"] == 3
    assert take_executed(cutoff) == ["keyed", "per a", "per b", "per c"]


SENSORS = """
    from pathlib import Path
    from barca import asset, partitions, partitions_from, sensor

    RETAILERS = ["r1", "r2", "r3"]

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @sensor(partitions={"retailer": partitions(RETAILERS)})
    def poll(retailer: str) -> str:
        _ran("poll " + retailer)
        p = Path(retailer + ".txt")
        return p.read_text() if p.exists() else "none"

    @asset(partitions={"retailer": partitions_from(poll)})
    def data(retailer: str, poll: str) -> str:
        _ran("data " + retailer)
        return retailer + ":" + poll
"""


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


def test_a_reader_of_a_partitioned_sensor_reruns_the_key_whose_value_changed(
        sensors: Path) -> None:
    barca(sensors, "get", "data", "pipeline.py").expect(0)
    take_executed(sensors)
    (sensors / "r2.txt").write_text("fresh")
    got = barca(sensors, "get", "data", "pipeline.py").expect(0)
    assert got.json["final_output"]["retailer=r2"] == "r2:fresh"
    assert got.steps["data"]["partitions"]["will_run_keys"] == ["retailer=r2"]
    assert take_executed(sensors) == ["data r2", "poll r1", "poll r2", "poll r3"]


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
        project: Path) -> None:
    write(project, {"pipeline.py": PARTITIONED_CUTOFF,
                    "versions.json": '{"a": 1, "b": 2, "c": 3}'})
    barca(project, "get", "report", "pipeline.py").expect(0)
    take_executed(project)

    (project / "versions.json").write_text('{"a": 5, "b": 2, "c": 4}')  # a: same bytes
    got = barca(project, "get", "report", "pipeline.py").expect(0)
    assert take_executed(project) == ["parity a", "parity c", "report c"]
    assert got.json["final_output"] == {"k=a": "a is odd", "k=b": "b is even",
                                        "k=c": "c is even"}
    again = barca(project, "get", "report", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 1 and take_executed(project) == []

    (project / "versions.json").write_text('{"a": 6, "b": 2, "c": 4}')
    last = barca(project, "get", "report", "pipeline.py").expect(0)
    assert take_executed(project) == ["parity a", "report a"]
    assert last.json["final_output"]["k=a"] == "a is even"
