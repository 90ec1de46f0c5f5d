"""Contract semantics (issue 16): inputs named by their id as text, `--partition` refusing a
target it would skip, and `final_output` of partitioned targets (after failed keys, and past a
thousand keys).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, edit, take_executed, write


def test_an_input_given_as_its_id_in_text_reads_like_asset_ref(project: Path) -> None:
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
    got = barca(project, "get", "total,count,joined,upper", "pipeline.py", "other.py").expect(0)
    targets = got.json["targets"]
    assert targets["total"]["final_output"] == 6
    assert targets["count"]["final_output"] == 3
    assert targets["joined"]["final_output"] == "aabb"
    assert targets["upper"]["final_output"] == {"k=a": "AA", "k=b": "BB"}
    listed = barca(project, "list", "--json", "pipeline.py", "other.py").expect(0).json
    node = next(n for n in listed["nodes"] if n["id"] == "pipeline.py:total")
    assert node["inputs"] == ["other.py:cleaned"]

    # the id must name a node, as asset_ref's must
    write(project, {"pipeline.py": """
        from barca import asset

        @asset(inputs={"x": "other.py:missing"})
        def total(x: list) -> int:
            return sum(x)
    """})
    bad = barca(project, "get", "total", "pipeline.py", "other.py").expect(2)
    assert "other.py:missing" in bad.envelope["error"]


SELECTION = """
    from barca import asset, collect, partitions, partitions_from, task

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def load(k: str) -> str:
        _ran("load " + k)
        return "v-" + k

    @asset(inputs={"all": collect(load)})
    def total(all: list) -> int:
        _ran("total")
        return len(all)

    @asset(inputs={"total": total})
    def report(total: int) -> str:
        _ran("report")
        return f"{total} keys"

    @task(inputs={"all": collect(load)})
    def publish(all: list) -> int:
        _ran("publish")
        return len(all)
"""


@pytest.mark.parametrize("args", [
    ("get", "total"),
    ("get", "report"),                       # skipped through the fan-in it reads
    ("get", "load,total"),
    ("run", "publish"),
    ("get", "report", "--refresh", "total"),
    ("get", "total", "--dry-run"),
], ids=["target", "below-a-fan-in", "one-of-targets", "run-task", "refresh", "dry-run"])
def test_naming_a_node_the_partition_selection_would_skip_is_exit_2(
        project: Path, args: tuple[str, ...]) -> None:
    write(project, {"pipeline.py": SELECTION})
    command, target, *rest = args
    bad = barca(project, command, target, "pipeline.py", *rest, "--partition", "k=a").expect(2)
    assert "--partition k=a would skip" in bad.envelope["error"]
    assert "reads every key of 'pipeline.py:load'" in bad.envelope["error"]
    assert "without --partition" in bad.envelope["remediation"]
    assert take_executed(project) == []
    assert not (project / ".barca" / "artifacts").exists()


def test_the_selection_still_skips_a_fan_in_it_was_not_asked_for(project: Path) -> None:
    write(project, {"pipeline.py": SELECTION})
    got = barca(project, "get", "pipeline.py", "--partition", "k=b").expect(0)
    assert got.statuses() == {"load": "ran", "total": "skipped", "report": "skipped"}
    assert take_executed(project) == ["load b"]
    # refreshing a node the selection narrows (not skips) is fine
    barca(project, "get", "load", "pipeline.py", "--partition", "k=b",
          "--refresh", "load").expect(0)
    assert take_executed(project) == ["load b"]


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


def test_a_run_with_failed_keys_gives_the_good_keys_of_the_target(project: Path) -> None:
    write(project, {"pipeline.py": FAILING})
    full = barca(project, "get", "score", "pipeline.py").expect(0).json["final_output"]
    assert full == {"k=a": "v-a!", "k=b": "v-b!", "k=c": "v-c!", "k=d": "v-d!"}

    # b and d fail upstream under new code: score's a and c are new, b and d are not current
    write(project, {"pipeline.py": FAILING.replace('"v-" + k', '"w-" + k'),
                    "fail_b": "", "fail_d": ""})
    got = barca(project, "get", "score", "pipeline.py").expect(1)
    assert got.json["final_output"] == {"k=a": "w-a!", "k=c": "w-c!"}
    assert got.json["failed_node"] in ("pipeline.py:load[k=b]", "pipeline.py:load[k=d]")

    # several targets: each gives what it has; the failed one names its failure too
    both = barca(project, "get", "score,other", "pipeline.py").expect(1).json["targets"]
    assert both["other"] == {"status": "success", "final_output": 1}
    assert both["score"]["status"] == "failed"
    assert both["score"]["final_output"] == {"k=a": "w-a!", "k=c": "w-c!"}

    # an unpartitioned target that failed has no value to give
    write(project, {"pipeline.py": FAILING.replace("return 1", "raise ValueError('no')")})
    one = barca(project, "get", "other", "pipeline.py").expect(1)
    assert "final_output" not in one.json


def test_get_json_with_o_value_gives_every_key_past_a_thousand(project: Path) -> None:
    write(project, {"pipeline.py": """
        from barca import asset, partitions

        KEYS = [f"k{i:04d}" for i in range(1500)]
        BUMP = 0

        @asset(partitions={"k": partitions(KEYS)})
        def per(k: str) -> int:
            return int(k[1:]) + BUMP
    """})
    first = barca(project, "get", "per", "pipeline.py", "--json", "-o", "value",
                  timeout=300).expect(0).json
    assert first["final_output"] == {f"k=k{i:04d}": i for i in range(1500)}
    again = barca(project, "get", "per", "pipeline.py", "-o", "value").expect(0).json
    assert again == first["final_output"]
    # the default JSON summarises past 1,000 keys: 1,500 cached keys, none read
    summary = barca(project, "get", "per", "pipeline.py").expect(0).json
    assert summary["steps_executed"] == 0
    assert summary["final_output"]["_barca_partitions"]["cached"] == 1500
    # a person's screen gets the first keys and a count
    shown = barca(project, "get", "per", "pipeline.py", "--pretty").expect(0).stdout
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


def test_a_sensors_update_flag_keeps_or_forces_its_readers(project: Path) -> None:
    write(project, {"pipeline.py": FLAGGED, "feed.json": "[null, 1]"})
    assert barca(project, "get", "reader", "pipeline.py").expect(0).json["final_output"] == 10
    assert take_executed(project) == ["reader"]

    def tick(flag, value) -> dict:
        (project / "feed.json").write_text(f"[{flag}, {value}]")
        return barca(project, "get", "reader", "pipeline.py").expect(0).json

    # (False, value): no update, the last observation stands and no reader reruns
    kept = tick("false", 2)
    assert kept["final_output"] == 10 and take_executed(project) == []
    assert barca(project, "get", "feed", "pipeline.py").json["final_output"] == 1
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
        project: Path, refreshed: str) -> None:
    write(project, {"pipeline.py": CASCADE, "raw.txt": "5 first"})
    barca(project, "get", "report", "pipeline.py").expect(0)
    take_executed(project)

    got = barca(project, "get", "report", "pipeline.py", "--refresh", refreshed).expect(0)
    ran = ["rate"] if refreshed == "rate" else ["rate", "raw"]
    assert take_executed(project) == ran
    assert got.statuses() == {"raw": "ran" if refreshed == "raw" else "cached", "rate": "ran",
                              "priced": "cached", "report": "cached"}

    # different bytes: the readers rerun, for that reason
    (project / "raw.txt").write_text("6 second")
    got = barca(project, "get", "report", "pipeline.py", "--refresh", "raw").expect(0)
    assert take_executed(project) == ["priced amer", "priced emea", "rate", "raw",
                                      "report amer", "report emea"]
    assert got.steps["priced"]["changed"] == ["input pipeline.py:rate"]
    assert got.json["final_output"] == {"region=amer": "AMER:6", "region=emea": "EMEA:6"}


def test_a_new_element_of_a_list_asset_runs_only_its_key(project: Path) -> None:
    write(project, {"pipeline.py": """
        import json
        from pathlib import Path
        from barca import asset, collect, partitions_from

        def _ran(name):
            with open("executed.log", "a") as fh:
                fh.write(name + "\\n")

        @asset()
        def ids() -> list:
            _ran("ids")
            return ["a", "b"]

        @asset(partitions={"id": partitions_from(ids)})
        def per(id: str) -> str:
            _ran("per " + id)
            return id * 2

        @asset(partitions={"id": partitions_from(ids)}, inputs={"all": ids})
        def whole(id: str, all: list) -> str:
            _ran("whole " + id)
            return f"{id} of {len(all)}"
    """})
    barca(project, "get", "per,whole", "pipeline.py").expect(0)
    take_executed(project)

    edit(project / "pipeline.py", 'return ["a", "b"]', 'return ["a", "b", "c"]')
    got = barca(project, "get", "per", "pipeline.py").expect(0)
    assert take_executed(project) == ["ids", "per c"]
    assert got.steps["per"]["partitions"]["will_run_keys"] == ["id=c"]
    assert got.json["final_output"] == {"id=a": "aa", "id=b": "bb", "id=c": "cc"}
    # a reader of the whole list depends on all of it: each of its keys reruns
    both = barca(project, "get", "whole", "pipeline.py").expect(0)
    assert take_executed(project) == ["whole a", "whole b", "whole c"]
    assert both.json["final_output"]["id=a"] == "a of 3"
    # an element removed: the other keys stay cached
    edit(project / "pipeline.py", 'return ["a", "b", "c"]', 'return ["a", "c"]')
    assert barca(project, "get", "per", "pipeline.py").expect(0).json["steps_executed"] == 1
    assert take_executed(project) == ["ids"]


MANUAL = """
    from pathlib import Path
    from barca import Manual, asset, partitions

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset()
    def base() -> str:
        _ran("base")
        return "base"

    @asset(freshness=Manual, inputs={"base": base})
    def snapshot(base: str) -> str:
        _ran("snapshot")
        return Path("source.txt").read_text()

    @asset(inputs={"snapshot": snapshot})
    def reader(snapshot: str) -> str:
        _ran("reader")
        return snapshot.upper()

    @asset(partitions={"k": partitions(["a", "b"])}, inputs={"snapshot": snapshot})
    def per(k: str, snapshot: str) -> str:
        _ran("per " + k)
        return k + snapshot
"""


def test_a_manual_asset_is_computed_once_then_kept_until_refreshed(project: Path) -> None:
    write(project, {"pipeline.py": MANUAL, "source.txt": "one"})
    never = barca(project, "get", "reader", "pipeline.py").expect(2)
    assert "freshness=Manual" in never.envelope["error"]
    assert "never been computed" in never.envelope["error"]
    assert "--refresh snapshot" in never.envelope["remediation"]
    assert take_executed(project) == []
    barca(project, "get", "reader", "pipeline.py", "--dry-run").expect(2)

    first = barca(project, "get", "reader,per", "pipeline.py", "--refresh", "snapshot")
    assert first.expect(0).json["targets"]["reader"]["final_output"] == "ONE"
    assert take_executed(project) == ["base", "per a", "per b", "reader", "snapshot"]
    assert barca(project, "get", "reader,per", "pipeline.py").expect(0).json[
        "steps_executed"] == 0

    # a code edit does not rerun it: status says stale, the run says why it did not run
    edit(project / "pipeline.py", 'return Path("source.txt").read_text()',
         'return Path("source.txt").read_text().strip()  # edited')
    (project / "source.txt").write_text("two\n")
    status = barca(project, "status", "pipeline.py", "--json").expect(0).json
    node = next(n for n in status["nodes"] if n["name"] == "snapshot")
    assert node["cache"]["state"] == "stale" and node["cache"]["reason"] == "manual"
    assert node["cache"]["changed"] == ["code"]
    assert "--refresh snapshot" in node["cache"]["detail"]
    assert next(n for n in status["nodes"] if n["name"] == "reader")["cache"]["state"] == "cached"
    dry = barca(project, "get", "reader", "pipeline.py", "--dry-run").expect(0)
    assert dry.steps["snapshot"]["action"] == "cached"
    assert dry.steps["snapshot"]["reason"] == "manual"
    assert "kept (freshness=Manual) though changed: code" in dry.steps["snapshot"]["detail"]
    got = barca(project, "get", "reader", "pipeline.py").expect(0)
    assert got.steps["snapshot"]["status"] == "cached"
    assert got.steps["snapshot"]["reason"] == "manual"
    assert got.json["final_output"] == "ONE" and take_executed(project) == []

    # a refresh of its upstream does not cascade to it; --refresh-all, as naming it, does
    barca(project, "get", "reader", "pipeline.py", "--refresh", "base").expect(0)
    assert take_executed(project) == ["base"]
    barca(project, "get", "reader", "pipeline.py", "--refresh-all").expect(0)
    assert take_executed(project) == ["base", "reader", "snapshot"]
    assert barca(project, "get", "reader", "pipeline.py").json["final_output"] == "TWO"
    take_executed(project)


def test_readers_of_a_manual_asset_hash_its_bytes(project: Path) -> None:
    write(project, {"pipeline.py": MANUAL, "source.txt": "one"})
    barca(project, "get", "reader,per", "pipeline.py", "--refresh", "snapshot").expect(0)
    assert take_executed(project) == ["base", "per a", "per b", "reader", "snapshot"]
    # a refresh that produces the same bytes reruns no reader
    same = barca(project, "get", "reader,per", "pipeline.py", "--refresh", "snapshot")
    assert same.expect(0).json["steps_executed"] == 1
    assert take_executed(project) == ["snapshot"]
    # an edit that leaves the bytes alone, then a refresh: still no reader reruns
    edit(project / "pipeline.py", '_ran("snapshot")', '_ran("snapshot")  # edited')
    barca(project, "get", "reader,per", "pipeline.py", "--refresh", "snapshot").expect(0)
    assert take_executed(project) == ["snapshot"]
    # new bytes: every reader reruns, naming the Manual asset as what changed
    (project / "source.txt").write_text("three")
    new = barca(project, "get", "reader,per", "pipeline.py", "--refresh", "snapshot").expect(0)
    assert take_executed(project) == ["per a", "per b", "reader", "snapshot"]
    assert new.steps["reader"]["changed"] == ["input pipeline.py:snapshot"]
    assert new.json["targets"]["per"]["final_output"] == {"k=a": "athree", "k=b": "bthree"}
