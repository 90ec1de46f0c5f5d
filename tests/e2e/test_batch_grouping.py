"""batch= grouping on the real CLI: which keys share a call, in what order, and which keys
are grouped at all (issue 14; `barca docs batch`, "Choosing the grouping").

Covered: batch=N (calls of at most N keys, in declared key order), "all" (one call),
batches([...]) (the groups named, a key in no group alone, keys of a group in key order),
batches([...], strict=True) (a stale key in no group is exit 2 before any step of the run
runs; a narrowed-away key in no group is fine), batches_by(fn) with int and str
labels and max_size; only stale keys are grouped (a partly cached group runs its stale keys
together, a fully cached group makes no call); --partition narrows first, then groups; a node
of two dimensions gets each dimension's values in its own parameter, input dicts keyed by
tuples in dimension-name order, and returns a dict keyed by such tuples; the
`[barca] batch:` line counts the calls; the dry run reports the grouping, keys and calls
(calls unknown for batches_by over more than the 20 keys it lists); a batched @task
runs all its keys in calls on every `barca run`, and `run` takes --batch too.

Every batch function appends `[node, keys]` as one JSON line to calls.log in the project, so
the tests see the calls that really happened, not only what barca reports. Calls of one node
run in parallel, so calls are compared as a sorted list (each call's own key order is kept).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import barca, take_calls, write

LOG_CALL = """
    import json

    def _call(node, keys):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps([node, keys]) + "\\n")
"""


def batch_line(stderr: str, node: str) -> str:
    found = [line for line in stderr.splitlines() if line.startswith(f"[barca] batch:{node} ")]
    assert len(found) == 1, f"no single [barca] batch:{node} line in:\n{stderr}"
    return found[0]


# ---------------------------------------------------------------------------------------------
# Every form of batch= over one declared key order (deliberately not alphabetical)

FORMS = LOG_CALL + """
    from barca import asset, batches, batches_by, partitions

    REGION = {"e": "x", "a": "y", "d": "x", "b": 1, "c": "y"}   # an int label is allowed
    HALF = {"e": "x", "a": "x", "d": "x", "b": "y", "c": "y"}

    def region_of(key):
        return REGION[key]

    def half_of(key):
        return HALF[key]

    @asset(partitions={"k": partitions(["e", "a", "d", "b", "c"])}, batch=2)
    def by2(k: list[str]) -> dict:
        _call("by2", k)
        return {key: "by2-" + key for key in k}

    @asset(partitions={"k": partitions(["e", "a", "d", "b", "c"])}, batch="all")
    def every(k: list[str]) -> dict:
        _call("every", k)
        return {key: "every-" + key for key in k}

    @asset(partitions={"k": partitions(["e", "a", "d", "b", "c"])},
           batch=batches([["b", "a"], ["c", "d"]]))
    def grouped(k: list[str]) -> dict:
        _call("grouped", k)
        return {key: "grouped-" + key for key in k}

    @asset(partitions={"k": partitions(["e", "a", "d", "b", "c"])}, batch=batches_by(region_of))
    def labelled(k: list[str]) -> dict:
        _call("labelled", k)
        return {key: "labelled-" + key for key in k}

    @asset(partitions={"k": partitions(["e", "a", "d", "b", "c"])},
           batch=batches_by(half_of, max_size=2))
    def capped(k: list[str]) -> dict:
        _call("capped", k)
        return {key: "capped-" + key for key in k}
"""

NODES = ("by2", "every", "grouped", "labelled", "capped")
EXPECTED_CALLS = {
    "by2": [["c"], ["d", "b"], ["e", "a"]],              # at most 2, in declared order
    "every": [["e", "a", "d", "b", "c"]],                # one call
    "grouped": [["a", "b"], ["d", "c"], ["e"]],          # group keys in key order; e alone
    "labelled": [["a", "c"], ["b"], ["e", "d"]],         # y: a,c; 1: b; x: e,d
    "capped": [["b", "c"], ["d"], ["e", "a"]],           # x: e,a,d split into <= 2; y: b,c
}


@pytest.fixture
def forms(project: Path) -> Path:
    return write(project, {"pipeline.py": FORMS})


def test_each_form_groups_the_keys_into_its_calls_in_declared_key_order(forms: Path) -> None:
    got = barca(forms, "get", ",".join(NODES), "pipeline.py").expect(0)
    assert take_calls(forms) == EXPECTED_CALLS
    for node in NODES:
        assert got.json["targets"][node]["final_output"] == {
            f"k={key}": f"{node}-{key}" for key in "abcde"}
        calls = len(EXPECTED_CALLS[node])
        assert f" {calls} call{'s' if calls > 1 else ''}, 5 keys |" in batch_line(
            got.stderr, f"pipeline.py:{node}")
    assert got.json["steps_executed"] == 25  # steps stay per key


def test_grouping_is_stable_from_run_to_run(forms: Path) -> None:
    barca(forms, "get", ",".join(NODES), "pipeline.py").expect(0)
    first = take_calls(forms)
    again = barca(forms, "get", ",".join(NODES), "pipeline.py", "--refresh",
                  ",".join(NODES)).expect(0)
    assert again.json["steps_executed"] == 25
    assert take_calls(forms) == first == EXPECTED_CALLS


def test_partition_narrows_first_then_groups(forms: Path) -> None:
    # by2 over e,a,d,b,c would be (e,a) (d,b) (c); narrowed to a,b,c it is (a,b) (c)
    got = barca(forms, "get", "by2,grouped,capped", "pipeline.py",
                "--partition", "k=a,b,c").expect(0)
    assert take_calls(forms) == {
        "by2": [["a", "b"], ["c"]],
        "grouped": [["a", "b"], ["c"]],       # d is not selected, so c runs alone
        "capped": [["a"], ["b", "c"]],        # label x: only a; label y: b,c
    }
    assert got.json["targets"]["by2"]["final_output"] == {
        "k=a": "by2-a", "k=b": "by2-b", "k=c": "by2-c"}


def test_the_dry_run_reports_keys_and_calls_of_each_batched_step(forms: Path) -> None:
    dry = barca(forms, "get", "by2,every", "pipeline.py", "--dry-run").expect(0)
    assert take_calls(forms) == {}  # nothing ran
    by2, every = dry.steps["by2"], dry.steps["every"]
    assert by2["batch"]["keys"] == 5 and by2["batch"]["calls"] == 3
    assert every["batch"]["keys"] == 5 and every["batch"]["calls"] == 1
    assert "5 keys in 3 calls (batch=2)" in by2["detail"]
    assert "5 keys in 1 call (batch=all)" in every["detail"]
    assert by2["batch"]["grouping"] == "batch=2"
    assert every["batch"]["grouping"] == "batch=all"
    grouped = barca(forms, "get", "grouped,labelled,capped", "pipeline.py", "--dry-run",
                    "--partition", "k=a,b,c").expect(0)
    assert {name: grouped.steps[name]["batch"]["calls"] for name in
            ("grouped", "labelled", "capped")} == {"grouped": 2, "labelled": 2, "capped": 2}
    assert take_calls(forms) == {}
    # the dry run's own counts follow the overrides too
    none = barca(forms, "get", "every", "pipeline.py", "--dry-run", "--batch", "none").expect(0)
    assert none.steps["every"]["batch"]["calls"] == 5


MANY = """
    from barca import asset, batches_by, partitions

    def parity(key):
        return int(key[1:]) % 2

    @asset(partitions={"k": partitions([f"k{i:02d}" for i in range(25)])}, batch=batches_by(parity))
    def many(k: list[str]) -> dict:
        return {key: key for key in k}

    @asset(partitions={"k": partitions([f"k{i:02d}" for i in range(25)])}, batch=10)
    def sized(k: list[str]) -> dict:
        return {key: key for key in k}
"""


def test_the_dry_run_does_not_count_labelled_calls_over_more_keys_than_it_lists(
        project: Path) -> None:
    write(project, {"pipeline.py": MANY})
    dry = barca(project, "get", "many,sized", "pipeline.py", "--dry-run").expect(0)
    assert dry.steps["many"]["batch"]["keys"] == 25
    assert dry.steps["many"]["batch"]["calls"] is None
    assert dry.steps["sized"]["batch"]["calls"] == 3
    few = barca(project, "get", "many", "pipeline.py", "--dry-run",
                "--partition", "k=k00,k01,k02").expect(0)
    assert few.steps["many"]["batch"]["calls"] == 2


# ---------------------------------------------------------------------------------------------
# strict=True

STRICT = LOG_CALL + """
    from barca import asset, batches, partitions

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def before(k: str) -> str:
        _call("before", [k])
        return k

    @asset(partitions={"k": partitions(["a", "b", "c"])}, inputs={"before": before},
           batch=batches([["a", "b"]], strict=True))
    def strict(k: list[str], before: dict) -> dict:
        _call("strict", k)
        return {key: before[key] + "!" for key in k}
"""


def test_strict_groups_refuse_a_stale_key_in_no_group_with_exit_2(project: Path) -> None:
    write(project, {"pipeline.py": STRICT})
    got = barca(project, "get", "strict", "pipeline.py").expect(2)
    err = got.envelope
    assert err["kind"] == "usage" and err["code"] == 2
    assert "pipeline.py:strict" in err["error"] and "k=c" in err["error"]
    assert "strict" in err["remediation"]
    # the keys are known in advance, so the miss is reported before any step runs
    assert take_calls(project) == {}
    assert "steps_executed" not in got.stdout

    # narrowed to grouped keys, the key in no group does not need to run: no error
    ok = barca(project, "get", "strict", "pipeline.py", "--partition", "k=a,b").expect(0)
    assert ok.json["final_output"] == {"k=a": "a!", "k=b": "b!"}
    assert take_calls(project)["strict"] == [["a", "b"]]


# ---------------------------------------------------------------------------------------------
# Only stale keys are grouped

KEYED = LOG_CALL + """
    from pathlib import Path
    from barca import asset, batches, partitions_from, sensor

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)},
           batch=batches([["a", "b", "c"], ["d", "e"]]))
    def grouped(k: list[str], versions: dict) -> dict:
        _call("grouped", k)
        return {key: {"k": key, "v": versions[key]} for key in k}

    @asset(partitions={"k": partitions_from(grouped)}, batch="all")
    def every(k: list[str], grouped: dict[str, dict]) -> dict:
        _call("every", k)
        return {key: grouped[key]["v"] * 10 for key in k}
"""

VERSIONS = {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}


def test_only_stale_keys_are_grouped_and_cached_groups_make_no_call(project: Path) -> None:
    write(project, {"pipeline.py": KEYED})
    (project / "versions.json").write_text(json.dumps(VERSIONS))
    barca(project, "get", "every", "pipeline.py").expect(0)
    assert take_calls(project) == {"grouped": [["a", "b", "c"], ["d", "e"]],
                                   "every": [["a", "b", "c", "d", "e"]]}

    # a and c changed: group (a,b,c) is partly cached, (d,e) fully cached
    (project / "versions.json").write_text(json.dumps({**VERSIONS, "a": 10, "c": 30}))
    got = barca(project, "get", "every", "pipeline.py").expect(0)
    assert take_calls(project) == {"grouped": [["a", "c"]], "every": [["a", "c"]]}
    assert got.json["final_output"] == {"k=a": 100, "k=b": 20, "k=c": 300, "k=d": 40,
                                        "k=e": 50}
    assert got.steps["grouped"]["partitions"]["will_run_keys"] == ["k=a", "k=c"]
    assert " 1 call, 2 keys |" in batch_line(got.stderr, "pipeline.py:grouped")

    # nothing changed: no call at all, and no batch line
    same = barca(project, "get", "every", "pipeline.py").expect(0)
    assert take_calls(project) == {}
    assert same.json["steps_executed"] == 1  # the sensor
    assert "[barca] batch:" not in same.stderr


# ---------------------------------------------------------------------------------------------
# Several dimensions

TWO_DIMS = """
    import json
    from barca import asset, batches_by, partitions

    def _log(entry):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps(entry) + "\\n")

    def region_of(key):
        return key["region"]     # with several dimensions fn gets a dict of dimension -> value

    @asset(partitions={"region": partitions(["emea", "amer"]), "day": partitions(["d2", "d1"])},
           batch="all")
    def sales(region: list, day: list) -> dict:
        _log(["sales", region, day])
        return {(d, r): f"{r}/{d}" for d, r in zip(day, region)}

    @asset(partitions={"region": partitions(["emea", "amer"]), "day": partitions(["d2", "d1"])},
           inputs={"sales": sales}, batch=batches_by(region_of))
    def per_region(region: list, day: list, sales: dict) -> dict:
        _log(["per_region", region, day, all(type(k) is tuple for k in sales),
              sorted([list(k), v] for k, v in sales.items())])
        return {(d, r): sales[(d, r)] + "!" for d, r in zip(day, region)}
"""


def test_two_dimensions_give_each_parameter_its_values_and_dicts_tuple_keys(
        project: Path) -> None:
    write(project, {"pipeline.py": TWO_DIMS})
    got = barca(project, "get", "per_region", "pipeline.py").expect(0)
    entries = [json.loads(line) for line in (project / "calls.log").read_text().splitlines()]
    sales = [e for e in entries if e[0] == "sales"]
    # keys ordered by dimension names ("day" before "region"), each dimension's values in
    # declared order; each dimension parameter gets its own values, in call order
    assert sales == [["sales", ["emea", "amer", "emea", "amer"], ["d2", "d2", "d1", "d1"]]]
    per_region = sorted(e[1:] for e in entries if e[0] == "per_region")
    # input dicts keep the keys as tuples of values in dimension-name order: (day, region)
    assert per_region == [
        [["amer", "amer"], ["d2", "d1"], True, [[["d1", "amer"], "amer/d1"],
                                                [["d2", "amer"], "amer/d2"]]],
        [["emea", "emea"], ["d2", "d1"], True, [[["d1", "emea"], "emea/d1"],
                                                [["d2", "emea"], "emea/d2"]]],
    ]
    assert got.json["final_output"] == {
        "day=d1,region=amer": "amer/d1!", "day=d1,region=emea": "emea/d1!",
        "day=d2,region=amer": "amer/d2!", "day=d2,region=emea": "emea/d2!"}


# ---------------------------------------------------------------------------------------------
# A batched @task under `barca run`

TASK = LOG_CALL + """
    from barca import asset, partitions, partitions_from, task

    @asset(partitions={"k": partitions(["a", "b", "c"])}, batch="all")
    def cleaned(k: list[str]) -> dict:
        _call("cleaned", k)
        return {key: key.upper() for key in k}

    @task(partitions={"k": partitions_from(cleaned)}, batch=2)
    def publish(k: list[str], cleaned: dict[str, str]) -> dict:
        _call("publish", k)
        return {key: "published " + cleaned[key] for key in k}
"""


def test_a_batched_task_runs_its_keys_in_calls_on_every_run(project: Path) -> None:
    write(project, {"pipeline.py": TASK})
    first = barca(project, "run", "publish", "pipeline.py").expect(0)
    assert take_calls(project) == {"cleaned": [["a", "b", "c"]],
                                   "publish": [["a", "b"], ["c"]]}
    assert first.json["final_output"] == {"k=a": "published A", "k=b": "published B",
                                          "k=c": "published C"}
    # tasks always run; their asset inputs come from cache; --batch applies to run too
    barca(project, "run", "publish", "pipeline.py", "--batch", "all").expect(0)
    assert take_calls(project) == {"publish": [["a", "b", "c"]]}
