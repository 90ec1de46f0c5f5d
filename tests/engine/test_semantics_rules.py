"""Contract semantics (issue 16) at the driver level (moved from
tests/e2e/test_contract_semantics.py, which keeps a refused selection, a list asset's new key
and a Manual asset against real workers): inputs named by their id as text, `--partition`
refusing a target it would skip, `final_output` of partitioned targets (after failed keys,
and past a thousand keys), a sensor's update flag, a refresh cascade stopped by a cutoff
asset, and readers of a Manual asset.
"""

from __future__ import annotations

import pytest

from barca.errors import UsageError
from conftest import barca_here, edit, take_executed, write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)
from rule_pipelines.semantics import MANUAL, SELECTION


def test_an_input_given_as_its_id_in_text_reads_like_asset_ref(engine: Engine) -> None:
    project = engine.root
    write(project, {
        "other.py": """
            from barca import asset

            @asset()
            def cleaned() -> list:
                return [1, 2, 3]
        """,
        "pipeline.py": """
            from barca import asset, asset_ref, collect, partitions, partitions_from

            @asset(inputs={"x": "other.py:cleaned"})
            def total(x: list) -> int:
                return sum(x)

            @asset(inputs={"x": asset_ref("other.py:cleaned")})
            def count(x: list) -> int:
                return len(x)

            @asset(partitions={"k": partitions(["a", "b"])})
            def per(k: str) -> str:
                return k * 2

            @asset(inputs={"all": collect("pipeline.py:per")})
            def joined(all: list) -> str:
                return "".join(all)

            @asset(partitions={"k": partitions_from("pipeline.py:per")})
            def upper(k: str, per: str) -> str:
                return per.upper()
        """})
    got = engine.get("total,count,joined,upper", "pipeline.py", "other.py").expect(0)
    targets = got.json["targets"]
    assert targets["total"]["final_output"] == 6
    assert targets["count"]["final_output"] == 3
    assert targets["joined"]["final_output"] == "aabb"
    assert targets["upper"]["final_output"] == {"k=a": "AA", "k=b": "BB"}
    listed = barca_here(project, "list", "--json", "pipeline.py", "other.py").expect(0).json
    node = next(n for n in listed["nodes"] if n["id"] == "pipeline.py:total")
    assert node["inputs"] == ["other.py:cleaned"]

    # the id must name a node, as asset_ref's must
    write(project, {"pipeline.py": """
        from barca import asset

        @asset(inputs={"x": "other.py:missing"})
        def total(x: list) -> int:
            return sum(x)
    """})
    with pytest.raises(UsageError, match="other.py:missing"):
        engine.get("total", "pipeline.py", "other.py")


@pytest.mark.parametrize("command, target, options", [
    ("get", "total", {}),
    ("get", "report", {}),                       # skipped through the fan-in it reads
    ("get", "load,total", {}),
    ("run", "publish", {}),
    ("get", "report", {"refresh": "total"}),
    ("get", "total", {"dry_run": True}),
], ids=["target", "below-a-fan-in", "one-of-targets", "run-task", "refresh", "dry-run"])
def test_naming_a_node_the_partition_selection_would_skip_is_a_usage_error(
        engine: Engine, command: str, target: str, options: dict) -> None:
    write(engine.root, {"pipeline.py": SELECTION})
    with pytest.raises(UsageError) as bad:
        engine(command, target, "pipeline.py", partition=("k=a",), **options)
    assert bad.value.exit_code == 2
    assert "--partition k=a would skip" in bad.value.message
    assert "reads every key of 'pipeline.py:load'" in bad.value.message
    assert "without --partition" in bad.value.remediation
    assert take_executed(engine.root) == []
    assert not (engine.root / ".barca" / "artifacts").exists()


def test_the_selection_still_skips_a_fan_in_it_was_not_asked_for(engine: Engine) -> None:
    write(engine.root, {"pipeline.py": SELECTION})
    got = engine.get(None, "pipeline.py", partition=("k=b",)).expect(0)
    assert got.statuses() == {"load": "ran", "total": "skipped", "report": "skipped"}
    assert take_executed(engine.root) == ["load b"]
    # refreshing a node the selection narrows (not skips) is fine
    engine.get("load", "pipeline.py", partition=("k=b",), refresh="load").expect(0)
    assert take_executed(engine.root) == ["load b"]


FAILING = """
    from pathlib import Path
    from barca import asset, partitions, partitions_from

    @asset(partitions={"k": partitions(["a", "b", "c", "d"])})
    def load(k: str) -> str:
        if Path("fail_" + k).exists():
            raise ValueError("boom on " + k)
        return "v-" + k

    @asset(partitions={"k": partitions_from(load)})
    def score(k: str, load: str) -> str:
        return load + "!"

    @asset()
    def other() -> int:
        return 1
"""


def test_a_run_with_failed_keys_gives_the_good_keys_of_the_target(engine: Engine) -> None:
    project = engine.root
    write(project, {"pipeline.py": FAILING})
    full = engine.get("score", "pipeline.py").expect(0).json["final_output"]
    assert full == {"k=a": "v-a!", "k=b": "v-b!", "k=c": "v-c!", "k=d": "v-d!"}

    # b and d fail upstream under new code: score's a and c are new, b and d are not current
    write(project, {"pipeline.py": FAILING.replace('"v-" + k', '"w-" + k'),
                    "fail_b": "", "fail_d": ""})
    got = engine.get("score", "pipeline.py").expect(1)
    assert got.json["final_output"] == {"k=a": "w-a!", "k=c": "w-c!"}
    assert got.json["failed_node"] in ("pipeline.py:load[k=b]", "pipeline.py:load[k=d]")

    # several targets: each gives what it has; the failed one names its failure too
    both = engine.get("score,other", "pipeline.py").expect(1).json["targets"]
    assert both["other"] == {"status": "success", "final_output": 1}
    assert both["score"]["status"] == "failed"
    assert both["score"]["final_output"] == {"k=a": "w-a!", "k=c": "w-c!"}

    # an unpartitioned target that failed has no value to give
    write(project, {"pipeline.py": FAILING.replace("return 1", "raise ValueError('no')")})
    one = engine.get("other", "pipeline.py").expect(1)
    assert "final_output" not in one.json


def test_get_json_summarises_past_a_thousand_keys_and_o_value_gives_every_key(
        engine: Engine) -> None:
    write(engine.root, {"pipeline.py": """
        from barca import asset, partitions

        KEYS = [f"k{i:04d}" for i in range(1500)]
        BUMP = 0

        @asset(partitions={"k": partitions(KEYS)})
        def per(k: str) -> int:
            return int(k[1:]) + BUMP
    """})
    first = engine.get("per", "pipeline.py").expect(0).json
    summary = first["final_output"]["_barca_partitions"]
    assert (summary["keys"], summary["computed"], summary["cached"]) == (1500, 1500, 0)
    again = engine.get("per", "pipeline.py").expect(0).json
    assert again["steps_executed"] == 0
    assert again["final_output"]["_barca_partitions"]["cached"] == 1500
    # every value on request (cached: the command starts no worker)
    every = barca_here(engine.root, "get", "per", "pipeline.py", "--json", "-o", "value")
    assert every.expect(0).json["final_output"] == {f"k=k{i:04d}": i for i in range(1500)}
    # a person's screen gets the first keys and a count
    shown = barca_here(engine.root, "get", "per", "pipeline.py", "--pretty").expect(0).stdout
    assert '"k=k0019": 19' in shown and "k=k0020" not in shown
    assert shown.rstrip().endswith("... and 1480 more keys (-o value gives every key)")


FLAGGED = """
    import json
    from pathlib import Path
    from barca import asset, sensor

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @sensor()
    def feed():
        flag, value = json.loads(Path("feed.json").read_text())
        return value if flag is None else (flag, value)

    @asset(inputs={"feed": feed})
    def reader(feed: int) -> int:
        _ran("reader")
        return feed * 10
"""


def test_a_sensors_update_flag_keeps_or_forces_its_readers(engine: Engine) -> None:
    project = engine.root
    write(project, {"pipeline.py": FLAGGED, "feed.json": "[null, 1]"})
    assert engine.get("reader", "pipeline.py").expect(0).json["final_output"] == 10
    assert take_executed(project) == ["reader"]

    def tick(flag, value) -> dict:
        (project / "feed.json").write_text(f"[{flag}, {value}]")
        return engine.get("reader", "pipeline.py").expect(0).json

    # (False, value): no update, the last observation stands and no reader reruns
    kept = tick("false", 2)
    assert kept["final_output"] == 10 and take_executed(project) == []
    assert engine.get("feed", "pipeline.py").json["final_output"] == 1
    # (True, value): an update, even of the same bytes: readers rerun
    forced = tick("true", 1)
    assert forced["final_output"] == 10 and take_executed(project) == ["reader"]
    assert {s["id"]: s.get("changed") for s in forced["steps"]}["pipeline.py:reader"] == [
        "sensor pipeline.py:feed"]
    # no update after a forced one: still nothing reruns
    assert tick("false", 5)["final_output"] == 10 and take_executed(project) == []
    # a plain value is an observation: readers rerun when its bytes change
    assert tick("null", 3)["final_output"] == 30 and take_executed(project) == ["reader"]
    assert tick("null", 3)["final_output"] == 30 and take_executed(project) == []
    # the first observation is taken, whatever the flag
    (project / ".barca").rename(project / "old-barca")
    assert tick("false", 4)["final_output"] == 40 and take_executed(project) == ["reader"]


CASCADE = """
    from pathlib import Path
    from barca import asset, partitions, partitions_from

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset()
    def raw() -> str:
        _ran("raw")
        return Path("raw.txt").read_text()

    @asset(inputs={"raw": raw}, cutoff=True)
    def rate(raw: str) -> int:
        _ran("rate")
        return int(raw.split()[0])

    @asset(partitions={"region": partitions(["emea", "amer"])}, inputs={"rate": rate})
    def priced(region: str, rate: int) -> str:
        _ran("priced " + region)
        return f"{region}:{rate}"

    @asset(partitions={"region": partitions_from(priced)})
    def report(region: str, priced: str) -> str:
        _ran("report " + region)
        return priced.upper()
"""


@pytest.mark.parametrize("refreshed", ["rate", "raw"])
def test_a_refresh_cascade_stops_at_a_cutoff_asset_with_the_same_bytes(
        engine: Engine, refreshed: str) -> None:
    project = engine.root
    write(project, {"pipeline.py": CASCADE, "raw.txt": "5 first"})
    engine.get("report", "pipeline.py").expect(0)
    take_executed(project)

    got = engine.get("report", "pipeline.py", refresh=refreshed).expect(0)
    ran = ["rate"] if refreshed == "rate" else ["rate", "raw"]
    assert take_executed(project) == ran
    assert got.statuses() == {"raw": "ran" if refreshed == "raw" else "cached", "rate": "ran",
                              "priced": "cached", "report": "cached"}

    # different bytes: the readers rerun, for that reason
    (project / "raw.txt").write_text("6 second")
    got = engine.get("report", "pipeline.py", refresh="raw").expect(0)
    assert take_executed(project) == ["priced amer", "priced emea", "rate", "raw",
                                      "report amer", "report emea"]
    assert got.steps["priced"]["changed"] == ["input pipeline.py:rate"]
    assert got.json["final_output"] == {"region=amer": "AMER:6", "region=emea": "EMEA:6"}


def test_readers_of_a_manual_asset_hash_its_bytes(engine: Engine) -> None:
    project = engine.root
    write(project, {"pipeline.py": MANUAL, "source.txt": "one"})
    engine.get("reader,per", "pipeline.py", refresh="snapshot").expect(0)
    assert take_executed(project) == ["base", "per a", "per b", "reader", "snapshot"]
    # a refresh that produces the same bytes reruns no reader
    same = engine.get("reader,per", "pipeline.py", refresh="snapshot")
    assert same.expect(0).json["steps_executed"] == 1
    assert take_executed(project) == ["snapshot"]
    # an edit that leaves the bytes alone, then a refresh: the readers rerun once, as in the
    # published barca (they hash the Manual asset's run hash beside its bytes)
    edit(project / "pipeline.py", '_ran("snapshot")', '_ran(str("snapshot"))')
    engine.get("reader,per", "pipeline.py", refresh="snapshot").expect(0)
    assert take_executed(project) == ["per a", "per b", "reader", "snapshot"]
    # new bytes: every reader reruns, naming the Manual asset as what changed
    (project / "source.txt").write_text("three")
    new = engine.get("reader,per", "pipeline.py", refresh="snapshot").expect(0)
    assert take_executed(project) == ["per a", "per b", "reader", "snapshot"]
    assert new.steps["reader"]["changed"] == ["input pipeline.py:snapshot"]
    assert new.json["targets"]["per"]["final_output"] == {"k=a": "athree", "k=b": "bthree"}
