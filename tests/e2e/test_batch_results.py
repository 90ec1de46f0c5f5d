"""What a batch function receives and returns, and how each key's result is recorded, on the
real CLI (issue 14; `barca docs batch`, "Writing a batch function", "Seeing calls").

Covered: the partition parameter is always a list (one key, `--batch none`, `--partition` of
one key); inputs arrive as {key: value} from a partitioned upstream (annotated `dict[str, T]`
or not) and from a keyed source, and whole from an unpartitioned upstream, once per call; a
returned dict writes each value as that key's artifact by the usual type rules, an int key
matches its string form; a pandas table is split per key by the dimension column and a
DuckDB relation input covers the call's keys with the dimension as a column; a
`barca.Failed("reason")` value fails that key alone (BatchKeyFailed) while the others succeed
and stay cached; a missing key fails that key alone ("batch returned no result for
retailer=r7"); an extra key or a result that is not a dict fails the whole call; a call that
raises fails all its keys and only its keys; `retries=2` reruns only the failed keys of a
call, together; the `[barca] batch:` and `[barca] metadata` lines, `batch_execution` on the
step, the call's id on each key in `history --json`, the call's row in `history --pretty` and
its count in `steps_page.nodes`, `--agent` progress per key, a call's output found from any of
its keys and in a failed key's `output_tail`.

Every batch function appends `[node, keys]` to calls.log, so the calls that really ran are
checked, not only what barca reports. Files named `fail_<key>`, `miss_<key>` etc. in the
project steer a pipeline into a failure and are deleted to "fix" it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import barca, take_calls, write

LOG_CALL = """
    import json
    from pathlib import Path

    def _call(node, keys, *extra):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps([node, keys, *extra]) + "\\n")
"""


def history_steps(root: Path, run_id: str) -> dict[str, dict]:
    """partition key -> the step row of `history RUN --json`."""
    steps = barca(root, "history", run_id, "--json").expect(0).json["steps"]
    return {s["partition_key"]: s for s in steps}


# ---------------------------------------------------------------------------------------------
# What the function receives

INPUTS = LOG_CALL + """
    from barca import asset, partitions, partitions_from, sensor

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset()
    def config() -> dict:
        return {"factor": 10}

    @asset(partitions={"k": partitions_from(versions)}, inputs={"cfg": config}, batch=2)
    def orders(k: list[str], versions, cfg: dict) -> dict:
        _call("orders", k, versions, cfg)
        return {key: {"k": key, "v": versions[key] * cfg["factor"]} for key in k}

    @asset(partitions={"k": partitions_from(orders)}, batch="all")
    def scored(k: list[str], orders: dict[str, dict]) -> dict:
        _call("scored", k, orders)
        return {key: orders[key]["v"] + 1 for key in k}

    @asset(partitions={"k": partitions_from(orders)}, batch="all")
    def unannotated(k, orders) -> dict:
        _call("unannotated", k, sorted(orders), type(k).__name__)
        return {key: orders[key]["k"] for key in k}

    @asset(partitions={"k": partitions(["only"])}, batch="all")
    def solo(k: list[str]) -> dict:
        _call("solo", k, type(k).__name__)
        return {key: key.upper() for key in k}
"""


@pytest.fixture
def inputs(project: Path) -> Path:
    return write(project, {"pipeline.py": INPUTS,
                           "versions.json": json.dumps({"a": 1, "b": 2, "c": 3})})


def test_inputs_arrive_as_key_to_value_and_whole_values_once_per_call(inputs: Path) -> None:
    got = barca(inputs, "get", "scored,unannotated,solo", "pipeline.py").expect(0)
    cfg = {"factor": 10}
    assert take_calls(inputs) == {
        # a keyed source: each call gets its own keys' values; config whole, once per call
        "orders": [[["a", "b"], {"a": 1, "b": 2}, cfg], [["c"], {"c": 3}, cfg]],
        "scored": [[["a", "b", "c"], {"a": {"k": "a", "v": 10}, "b": {"k": "b", "v": 20},
                                      "c": {"k": "c", "v": 30}}]],
        "unannotated": [[["a", "b", "c"], ["a", "b", "c"], "list"]],
        "solo": [[["only"], "list"]],                 # one key is still a list
    }
    targets = got.json["targets"]
    assert targets["scored"]["final_output"] == {"k=a": 11, "k=b": 21, "k=c": 31}
    assert targets["unannotated"]["final_output"] == {"k=a": "a", "k=b": "b", "k=c": "c"}
    assert targets["solo"]["final_output"] == {"k=only": "ONLY"}


def test_batch_none_and_a_single_partition_still_pass_a_list(inputs: Path) -> None:
    barca(inputs, "get", "scored", "pipeline.py", "--batch", "none").expect(0)
    calls = take_calls(inputs)
    assert [c[0] for c in calls["orders"]] == [["a"], ["b"], ["c"]]
    assert [c[0] for c in calls["scored"]] == [["a"], ["b"], ["c"]]
    assert calls["scored"][0][1] == {"a": {"k": "a", "v": 10}}  # only the call's own key

    (inputs / "versions.json").write_text(json.dumps({"a": 5, "b": 2, "c": 3}))
    barca(inputs, "get", "unannotated", "pipeline.py", "--partition", "k=a").expect(0)
    assert take_calls(inputs)["unannotated"] == [[["a"], ["a"], "list"]]


# ---------------------------------------------------------------------------------------------
# What it returns

RETURNS = LOG_CALL + """
    import pandas as pd
    from barca import asset, partitions

    @asset(partitions={"k": partitions(["d", "i", "s"])}, batch="all")
    def mixed(k: list[str]) -> dict:
        _call("mixed", k)
        return {"d": {"x": 1}, "i": 7, "s": {1, 2}}      # json, json, pickle

    @asset(partitions={"n": partitions([1, 2, 3])}, batch="all")
    def numbered(n: list) -> dict:
        _call("numbered", [str(x) for x in n])
        return {int(x): int(x) * 100 for x in n}           # 1 is the key "1"

    @asset(partitions={"k": partitions(["a", "b", "empty"])}, batch="all")
    def table(k: list[str]) -> pd.DataFrame:
        _call("table", k)
        return pd.DataFrame({"k": ["b", "a", "b"], "amount": [3, 1, 2]})
"""


def test_a_dict_result_writes_each_value_by_the_usual_type_rules(project: Path) -> None:
    write(project, {"pipeline.py": RETURNS})
    got = barca(project, "get", "mixed,numbered", "pipeline.py").expect(0)
    assert take_calls(project) == {"mixed": [["d", "i", "s"]], "numbered": [["1", "2", "3"]]}
    assert got.json["targets"]["numbered"]["final_output"] == {"n=1": 100, "n=2": 200,
                                                               "n=3": 300}
    formats = {key: s["artifact_format"]
               for key, s in history_steps(project, got.json["run_id"]).items()}
    assert formats["k=d"] == "json" and formats["k=i"] == "json"
    assert formats["k=s"] == "pickle"
    # each key is its own artifact, the same as without batching
    mixed = got.json["targets"]["mixed"]["final_output"]
    assert mixed["k=d"] == {"x": 1} and mixed["k=i"] == 7


def test_a_table_result_is_split_into_one_table_per_key(project: Path) -> None:
    write(project, {"pipeline.py": RETURNS})
    got = barca(project, "get", "table", "pipeline.py").expect(0)
    steps = history_steps(project, got.json["run_id"])
    assert {s["artifact_format"] for s in steps.values()} == {"parquet"}
    import pandas as pd

    def rows(key: str) -> list[dict]:
        return pd.read_parquet(project / steps[key]["artifact_path"]).to_dict("records")

    assert rows("k=b") == [{"k": "b", "amount": 2}, {"k": "b", "amount": 3}]  # sorted
    assert rows("k=a") == [{"k": "a", "amount": 1}]
    empty = pd.read_parquet(project / steps["k=empty"]["artifact_path"])
    assert len(empty) == 0 and list(empty.columns) == ["k", "amount"]


LAZY = LOG_CALL + """
    import duckdb
    import pandas as pd
    from barca import asset, partitions, partitions_from

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def cleaned(k: str) -> pd.DataFrame:
        return pd.DataFrame({"amount": [1, 2] if k == "a" else [10]})

    @asset(partitions={"k": partitions_from(cleaned)}, batch=2)
    def scored(k: list[str], cleaned: duckdb.DuckDBPyRelation) -> dict:
        rows = cleaned.aggregate("k, sum(amount)::INTEGER AS total", "k").fetchall()
        _call("scored", k, sorted([list(r) for r in rows]))
        return {key: total for key, total in rows}
"""


def test_a_lazy_table_input_covers_the_calls_keys_with_the_dimension_column(
        project: Path) -> None:
    write(project, {"pipeline.py": LAZY})
    got = barca(project, "get", "scored", "pipeline.py").expect(0)
    assert take_calls(project) == {"scored": [[["a", "b"], [["a", 3], ["b", 10]]],
                                              [["c"], [["c", 10]]]]}
    assert got.json["final_output"] == {"k=a": 3, "k=b": 10, "k=c": 10}


# ---------------------------------------------------------------------------------------------
# Failures: one key, a missing key, an extra key, a whole call

FAILURES = LOG_CALL + """
    from barca import Failed, asset, partitions

    @asset(partitions={"retailer": partitions(["r1", "r2", "r3", "r7"])}, batch="all")
    def scored(retailer: list[str]) -> dict:
        _call("scored", retailer)
        print("scoring " + ",".join(retailer))
        if Path("raise").exists():
            raise RuntimeError("warehouse down")
        if Path("not_a_dict").exists():
            return [1, 2]
        out = {}
        for r in retailer:
            if Path("fail_" + r).exists():
                out[r] = Failed(f"{r} has no rows")
            elif not Path("miss_" + r).exists():
                out[r] = {"retailer": r}
        if Path("extra").exists():
            out["r9"] = {"retailer": "r9"}
        return out
"""

EVERY = ["retailer=r1", "retailer=r2", "retailer=r3", "retailer=r7"]


@pytest.fixture
def failures(project: Path) -> Path:
    return write(project, {"pipeline.py": FAILURES})


def test_failed_fails_that_key_alone_and_the_others_are_cached(failures: Path) -> None:
    (failures / "fail_r2").write_text("")
    got = barca(failures, "get", "scored", "pipeline.py").expect(1)
    assert got.json["failed_node"] == "pipeline.py:scored[retailer=r2]"
    assert got.envelope["kind"] == "step_failed"
    assert sorted(got.json["final_output"]) == ["retailer=r1", "retailer=r3", "retailer=r7"]
    steps = history_steps(failures, got.json["run_id"])
    assert steps["retailer=r2"]["status"] == "failed"
    assert steps["retailer=r2"]["error_type"] == "BatchKeyFailed"
    assert steps["retailer=r2"]["error_message"] == "r2 has no rows"
    assert "scoring r1,r2,r3,r7" in json.dumps(steps["retailer=r2"]["output_tail"])  # the call's
    assert {k for k, s in steps.items() if s["status"] == "success"} == {
        "retailer=r1", "retailer=r3", "retailer=r7"}
    assert take_calls(failures) == {"scored": [["r1", "r2", "r3", "r7"]]}

    (failures / "fail_r2").unlink()
    fixed = barca(failures, "get", "scored", "pipeline.py").expect(0)
    assert take_calls(failures) == {"scored": [["r2"]]}   # the others were cached
    assert fixed.json["steps_executed"] == 1
    assert sorted(fixed.json["final_output"]) == EVERY


def test_a_missing_key_fails_that_key_alone(failures: Path) -> None:
    (failures / "miss_r7").write_text("")
    got = barca(failures, "get", "scored", "pipeline.py").expect(1)
    steps = history_steps(failures, got.json["run_id"])
    assert steps["retailer=r7"]["status"] == "failed"
    assert steps["retailer=r7"]["error_message"] == "batch returned no result for retailer=r7"
    assert [k for k, s in sorted(steps.items()) if s["status"] == "success"] == EVERY[:3]
    assert "batch returned no result for retailer=r7" in got.json["error"]


@pytest.mark.parametrize("trigger, words", [
    ("extra", ["retailer=r9", "not one of this call's keys"]),
    ("not_a_dict", ["dict", "list"]),
    ("raise", ["warehouse down"]),
])
def test_an_extra_key_a_wrong_result_or_a_raise_fails_every_key_of_the_call(
        failures: Path, trigger: str, words: list[str]) -> None:
    (failures / trigger).write_text("")
    got = barca(failures, "get", "scored", "pipeline.py").expect(1)
    assert not got.json.get("final_output")
    steps = history_steps(failures, got.json["run_id"])
    assert sorted(steps) == EVERY
    for key, step in steps.items():
        assert step["status"] == "failed", key
        for word in words:
            assert word in step["error"], (key, step["error"])
        assert step["artifact_path"] is None

    # nothing was cached: once fixed, every key runs again in one call
    (failures / trigger).unlink()
    take_calls(failures)
    barca(failures, "get", "scored", "pipeline.py").expect(0)
    assert take_calls(failures) == {"scored": [["r1", "r2", "r3", "r7"]]}


def test_a_raising_call_fails_its_own_keys_only(failures: Path) -> None:
    (failures / "fail_r3").write_text("")   # fails r3 alone when it does not raise
    edit_batch = (failures / "pipeline.py").read_text().replace(
        'batch="all")', 'batch=2)').replace(
        'if Path("raise").exists():', 'if "r3" in retailer and Path("raise").exists():')
    (failures / "pipeline.py").write_text(edit_batch)
    (failures / "raise").write_text("")
    got = barca(failures, "get", "scored", "pipeline.py").expect(1)
    assert take_calls(failures) == {"scored": [["r1", "r2"], ["r3", "r7"]]}
    steps = history_steps(failures, got.json["run_id"])
    assert {k: s["status"] for k, s in steps.items()} == {
        "retailer=r1": "success", "retailer=r2": "success",
        "retailer=r3": "failed", "retailer=r7": "failed"}
    assert "warehouse down" in steps["retailer=r7"]["error"]
    assert "RuntimeError" in steps["retailer=r7"]["error"]


# ---------------------------------------------------------------------------------------------
# retries= reruns the failed keys of a call, together

RETRIES = LOG_CALL + """
    from barca import Failed, asset, partitions

    @asset(partitions={"k": partitions(["a", "b", "c", "d", "e"])}, batch=3, retries=2)
    def flaky(k: list[str]) -> dict:
        _call("flaky", k)
        out = {}
        for key in k:
            marker = Path("tried_" + key)
            first = not marker.exists()
            marker.write_text("")
            if key in ("b", "c") and first:
                out[key] = Failed(f"{key} not ready yet")   # fails once, then works
            elif key == "d":
                out[key] = Failed("d is never ready")        # fails every attempt
            else:
                out[key] = key.upper()
        return out
"""


def test_retries_rerun_only_the_failed_keys_of_a_call_together(project: Path) -> None:
    write(project, {"pipeline.py": RETRIES})
    got = barca(project, "get", "flaky", "pipeline.py").expect(1)   # d fails both attempts
    log = [json.loads(line) for line in (project / "calls.log").read_text().splitlines()]
    # calls (a, b, c) and (d, e); then b and c together, and d alone; a and e never again
    assert sorted(keys for _, keys in log) == [["a", "b", "c"], ["b", "c"], ["d"], ["d", "e"]]
    order = [keys for _, keys in log]
    assert order.index(["b", "c"]) > order.index(["a", "b", "c"])
    assert order.index(["d"]) > order.index(["d", "e"])
    steps = history_steps(project, got.json["run_id"])
    assert steps["k=a"]["status"] == "success" and steps["k=a"]["attempts"] == 1
    assert steps["k=b"]["status"] == "success" and steps["k=b"]["attempts"] == 2
    assert steps["k=c"]["status"] == "success" and steps["k=c"]["attempts"] == 2
    assert steps["k=d"]["status"] == "failed" and steps["k=d"]["attempts"] == 2
    assert steps["k=d"]["error_message"] == "d is never ready"
    assert steps["k=e"]["status"] == "success" and steps["k=e"]["attempts"] == 1


RAISING_RETRY = LOG_CALL + """
    from barca import asset, partitions

    @asset(partitions={"k": partitions(["a", "b"])}, batch="all", retries=2)
    def shaky(k: list[str]) -> dict:
        _call("shaky", k)
        if not Path("tried").exists():
            Path("tried").write_text("")
            raise RuntimeError("first call fails")
        return {key: key for key in k}
"""


def test_a_call_that_raised_is_retried_with_all_its_keys_together(project: Path) -> None:
    write(project, {"pipeline.py": RAISING_RETRY})
    got = barca(project, "get", "shaky", "pipeline.py").expect(0)
    assert take_calls(project) == {"shaky": [["a", "b"], ["a", "b"]]}
    assert got.json["final_output"] == {"k=a": "a", "k=b": "b"}


LOST_MIDWAY = LOG_CALL + """
    import os
    import signal
    import sqlite3
    import time

    from barca import asset, partitions

    def _recorded() -> int:
        conn = sqlite3.connect("file:.barca/metadata.db?mode=ro", uri=True)
        try:
            return conn.execute("SELECT count(*) FROM materializations WHERE "
                                "node_id = 'pipeline.py:written'").fetchone()[0]
        finally:
            conn.close()

    class DiesWhenStored:
        \"\"\"Kills its worker the first time it is pickled (while the call writes its keys),
        once the keys written before it are recorded (the worker reports them within a
        second).\"\"\"

        def __reduce__(self):
            if not Path("died").exists():
                Path("died").write_text("")
                deadline = time.monotonic() + 60
                while _recorded() < 3 and time.monotonic() < deadline:
                    time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGKILL)
            return (str, ("stored",))

    @asset(partitions={"k": partitions(["a", "b", "c", "d", "e"])}, batch="all",
           retries=RETRIES)
    def written(k: list[str]) -> dict:
        _call("written", k)
        return {key: DiesWhenStored() if key == "d" else key for key in k}
"""


@pytest.mark.parametrize("retries", [1, 2])
def test_a_worker_lost_while_writing_keeps_the_keys_it_had_written(project: Path,
                                                                    retries: int) -> None:
    """Keys are reported as they are written: a worker killed midway through a call's writes
    leaves a, b and c recorded once, and only d and e are retried (or failed)."""
    write(project, {"pipeline.py": LOST_MIDWAY.replace("RETRIES", str(retries))})
    got = barca(project, "get", "written", "pipeline.py").expect(0 if retries == 2 else 1)
    calls = take_calls(project)["written"]
    assert calls == ([["a", "b", "c", "d", "e"], ["d", "e"]] if retries == 2
                     else [["a", "b", "c", "d", "e"]])
    steps = barca(project, "history", got.json["run_id"], "--json").expect(0).json["steps"]
    assert sorted(s["partition_key"] for s in steps) == ["k=a", "k=b", "k=c", "k=d", "k=e"]
    by_key = {s["partition_key"]: s for s in steps}
    for key in "abc":
        assert by_key[f"k={key}"]["status"] == "success"
        assert by_key[f"k={key}"]["attempts"] == 1
    for key in "de":
        step = by_key[f"k={key}"]
        if retries == 2:
            assert step["status"] == "success"
        else:
            assert (step["status"], step["error_type"]) == ("failed", "WorkerLost")
    if retries == 1:  # the next run computes only the keys that failed
        barca(project, "get", "written", "pipeline.py").expect(0)
        assert take_calls(project) == {"written": [["d", "e"]]}
    value = barca(project, "get", "written", "pipeline.py").expect(0).json["final_output"]
    assert value["k=d"]["_barca_artifact"]["format"] == "pickle"  # shown by reference
    assert {k: v for k, v in value.items() if k != "k=d"} == {"k=a": "a", "k=b": "b",
                                                             "k=c": "c", "k=e": "e"}


MANY_KEYS = """
    from barca import asset, partitions, partitions_from

    @asset(partitions={"k": partitions([f"k{i:04d}" for i in range(2048)])}, batch="all")
    def first(k: list[str]) -> dict:
        return {key: key for key in k}

    @asset(partitions={"k": partitions_from(first)}, batch="all")
    def second(k: list[str], first: dict[str, str]) -> dict:
        return {key: first[key] + "!" for key in k}
"""


def test_every_call_is_reported_though_its_keys_arrive_before_its_end(project: Path) -> None:
    """A call's keys are reported as they are written and its timing after them, in another
    message: the run waits for that message, so the last node's call is in the batch lines and
    the JSON (2,048 keys: the last key fills a message of its own)."""
    write(project, {"pipeline.py": MANY_KEYS})
    got = barca(project, "get", "second", "pipeline.py").expect(0)
    for node in ("first", "second"):
        assert f"[barca] batch:pipeline.py:{node} 1 call, 2048 keys | import " in got.stderr
    step = {s["id"]: s for s in got.json["steps"]}["pipeline.py:second"]
    assert step["batch_execution"]["calls"] == 1 and step["batch_execution"]["keys"] == 2048


# ---------------------------------------------------------------------------------------------
# Seeing calls

SEEN = LOG_CALL + """
    from barca import asset, partitions

    @asset(partitions={"k": partitions(["a", "b", "c"])}, batch=2)
    def scored(k: list[str]) -> dict:
        print("scoring " + ",".join(k))
        return {key: key for key in k}
"""


def test_agent_progress_counts_keys_not_calls(project: Path) -> None:
    write(project, {"pipeline.py": SEEN})
    got = barca(project, "get", "scored", "pipeline.py", "--agent").expect(0)
    done = sorted(line.split()[1] for line in got.stderr.splitlines()
                  if line.startswith("[barca] step:") and " completed " in line)
    assert done == ["step:pipeline.py:scored[k=a]", "step:pipeline.py:scored[k=b]",
                    "step:pipeline.py:scored[k=c]"]


@pytest.fixture
def seen(project: Path) -> tuple[Path, dict, str]:
    write(project, {"pipeline.py": SEEN})
    got = barca(project, "get", "scored", "pipeline.py").expect(0)
    return project, got.json, got.stderr


def test_the_run_prints_one_batch_line_per_node_then_the_metadata_line(seen) -> None:
    _, _, stderr = seen
    err = stderr.splitlines()
    batch = [i for i, line in enumerate(err)
             if line.startswith("[barca] batch:pipeline.py:scored 2 calls, 3 keys | import ")]
    meta = [i for i, line in enumerate(err)
            if line.startswith("[barca] metadata ") and "recording this run's results" in line]
    assert len(batch) == 1 and len(meta) == 1, stderr
    for part in ("load ", "compute ", "split ", "write "):
        assert part in err[batch[0]]
    assert batch[0] < meta[0]
    # the same lines are in the run's logs
    root, body, _ = seen
    logs = barca(root, "logs", body["run_id"]).expect(0).stdout
    assert "[barca] batch:pipeline.py:scored 2 calls, 3 keys" in logs


def test_the_json_of_a_real_run_reports_batch_execution(seen) -> None:
    _, body, _ = seen
    step = next(s for s in body["steps"] if s["id"] == "pipeline.py:scored")
    execution = step["batch_execution"]
    assert execution["calls"] == 2 and execution["keys"] == 3
    for part in ("import", "load", "compute", "split", "write"):
        assert execution[f"{part}_seconds"] >= 0
    assert body["metadata_seconds"] >= 0


def test_history_gives_each_key_its_calls_id(seen) -> None:
    root, body, _ = seen
    steps = history_steps(root, body["run_id"])
    ids = {key: s["batch"] for key, s in steps.items()}
    assert all(ids.values()), ids
    assert ids["k=a"] == ids["k=b"] != ids["k=c"]
    history = barca(root, "history", body["run_id"], "--json").expect(0).json
    assert history["steps_page"]["nodes"] == [
        {"node_id": "pipeline.py:scored", "keys": 3, "failed": 0, "calls": 2,
         "elapsed_seconds": history["steps_page"]["nodes"][0]["elapsed_seconds"]}]
    table = barca(root, "history", body["run_id"], "--pretty").expect(0).stdout.splitlines()
    call = next(i for i, line in enumerate(table) if line.startswith("pipeline.py:scored[2 keys]"))
    assert f"batch {ids['k=a']}" in table[call]
    assert {table[call + 1].split()[0], table[call + 2].split()[0]} == {
        "pipeline.py:scored[k=a]", "pipeline.py:scored[k=b]"}


def test_a_calls_output_is_found_from_any_of_its_keys(seen) -> None:
    root, body, _ = seen
    for key in ("a", "b"):
        out = barca(root, "logs", body["run_id"], "--step", f"scored[k={key}]").expect(0)
        assert "scoring a,b" in out.stdout, out.stdout
    out = barca(root, "logs", body["run_id"], "--step", "scored[k=c]").expect(0)
    assert "scoring c" in out.stdout and "scoring a,b" not in out.stdout


TIMEOUT = LOG_CALL + """
    import time
    from barca import asset, partitions

    @asset(partitions={"k": partitions(["a", "b", "c"])}, batch=2, timeout_seconds=2)
    def slow(k: list[str]) -> dict:
        _call("slow", k)
        if "a" in k:
            time.sleep(60)
        return {key: 1 for key in k}
"""


def test_timeout_seconds_applies_per_call_and_fails_only_that_calls_keys(project: Path) -> None:
    write(project, {"pipeline.py": TIMEOUT})
    failed = barca(project, "get", "slow", "pipeline.py", timeout=50).expect(1)
    assert take_calls(project) == {"slow": [["a", "b"], ["c"]]}
    steps = history_steps(project, failed.json["run_id"])
    assert {k: s["status"] for k, s in steps.items()} == {"k=a": "failed", "k=b": "failed",
                                                         "k=c": "success"}
    assert steps["k=a"]["error_type"] == steps["k=b"]["error_type"] == "TimeoutError"
    assert "timed out after 2s" in steps["k=a"]["error_message"]
    assert steps["k=a"]["batch"] == steps["k=b"]["batch"] != steps["k=c"]["batch"]
