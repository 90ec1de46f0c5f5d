"""A batch result names each key once, in whatever form (issue 26, item 8; `barca docs batch`,
"Writing a batch function").

`1` and `"1"` are one key (a returned key is matched by its string form), so a dict or a table
holding both is refused as a key source's is: the call's keys fail with "key '1' appears
twice", and no value is kept for the key (before, whichever came last was kept, silently). A
numpy integer key, what a pandas column gives, is that key too. Real `barca get` runs; the
recorded steps are read back with `barca history --json`.
"""

from __future__ import annotations

from pathlib import Path

from conftest import barca, write

PIPELINE = """
    from pathlib import Path

    import numpy as np
    import pandas as pd
    from barca import asset, partitions

    @asset(partitions={"k": partitions(["1", "2"])}, batch="all")
    def twice(k: list[str]) -> dict:
        return {1: "from the int", "1": "from the str", "2": "two"}

    @asset(partitions={"k": partitions(["1", "2"])}, batch="all")
    def twice_in_a_table(k: list[str]):
        return pd.DataFrame({"k": [1, "1", "2"], "v": [10, 11, 20]}, dtype=object)

    @asset(partitions={"k": partitions(["1", "2", "3"])}, batch="all")
    def numpy_keys(k: list[str]) -> dict:
        frame = pd.DataFrame({"k": [int(x) for x in k], "v": [10, 20, 30]})
        totals = dict(zip(frame["k"].to_numpy(), frame["v"].tolist()))  # np.int64 keys
        assert all(type(key) is np.int64 for key in totals)
        return totals
"""


def history_steps(root: Path, run_id: str) -> dict[str, dict]:
    steps = barca(root, "history", run_id, "--json").expect(0).json["steps"]
    return {s["step_id"]: s for s in steps}


def test_a_key_returned_as_int_and_as_str_fails_the_calls_keys(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    got = barca(project, "get", "twice", "pipeline.py").expect(1)
    assert not got.json.get("final_output")
    steps = history_steps(project, got.json["run_id"])
    for key in ("k=1", "k=2"):
        step = steps[f"pipeline.py:twice[{key}]"]
        assert step["status"] == "failed", step
        assert step["error_type"] == "BatchResultError"
        assert step["error_message"] == ("key '1' appears twice in the batch result (as 1 and "
                                         "'1'); return each key once")
        assert step["artifact_path"] is None
    assert not list((project / ".barca" / "artifacts").glob("pipeline.py--twice/*"))


def test_a_table_whose_key_column_holds_int_and_str_fails_the_calls_keys(
        project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    got = barca(project, "get", "twice_in_a_table", "pipeline.py").expect(1)
    steps = history_steps(project, got.json["run_id"])
    for key in ("k=1", "k=2"):
        step = steps[f"pipeline.py:twice_in_a_table[{key}]"]
        assert step["status"] == "failed", step
        assert step["error_type"] == "BatchResultError"
        assert step["error_message"].startswith(
            "key '1' appears twice in the batch result (as 1 and '1')"), step


def test_numpy_integer_keys_are_the_calls_keys(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    got = barca(project, "get", "numpy_keys", "pipeline.py").expect(0)
    assert got.json["final_output"] == {"k=1": 10, "k=2": 20, "k=3": 30}
    again = barca(project, "get", "numpy_keys", "pipeline.py").expect(0)
    assert again.statuses() == {"numpy_keys": "cached"}
