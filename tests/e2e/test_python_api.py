"""`barca.get` / `barca.run` from Python: the same engine in-process, values loaded.

Each test writes a small driver script into the project and runs it with the test's Python,
so the API is used exactly as a user would, in a fresh interpreter, against a real project.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, drive, lines, read_runs, write

PIPELINE = """
    from barca import asset, task

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset()
    def a() -> int:
        _ran("a")
        return 1

    @asset(inputs={"a": a})
    def b(a: int) -> dict:
        _ran("b")
        return {"b": a + 1}

    @asset()
    def things() -> set:
        return {1, 2}

    @asset()
    def frame():
        import pandas as pd
        return pd.DataFrame({"x": [1, 2, 3]})

    @asset()
    def broken() -> int:
        raise ValueError("broken on purpose")

    @task(inputs={"b": b})
    def publish(b: dict) -> str:
        _ran("publish")
        return f"published {b['b']}"
"""


@pytest.fixture
def api(project: Path) -> Path:
    return write(project, {"pipeline.py": PIPELINE})


def test_get_returns_loaded_values_and_shares_the_cli_cache(api: Path) -> None:
    out = drive(api, """
import json, os, barca
b = barca.get("b", "pipeline.py")
things = barca.get("things", ["pipeline.py"])
print(json.dumps({"b": b, "things": sorted(things), "set": isinstance(things, set),
                  "pid": os.getpid()}))
""")
    assert out["b"] == {"b": 2}
    assert out["things"] == [1, 2] and out["set"] is True  # the pickle, unpickled
    # in-process: the run was coordinated by the driver's own process
    assert (out["pid"],) in read_runs(api, "pid")
    cli = barca(api, "get", "b", "pipeline.py").expect(0)
    assert cli.json["steps_executed"] == 0 and cli.json["final_output"] == {"b": 2}
    assert lines(api / "executed.log") == ["a", "b"]


def test_get_loads_a_table_result_as_a_dataframe(api: Path) -> None:
    out = drive(api, """
import json, barca
frame = barca.get("frame", "pipeline.py")
print(json.dumps([type(frame).__module__.split(".")[0], type(frame).__name__,
                  frame["x"].tolist()]))
""")
    assert out == ["pandas", "DataFrame", [1, 2, 3]]


def test_get_refresh_recomputes_like_the_cli_flag(api: Path) -> None:
    out = drive(api, """
import json, barca
first = barca.get("b", "pipeline.py")
again = barca.get("b", "pipeline.py", refresh=["a"])
only = barca.get("b", "pipeline.py", refresh="a", cascade=False)
everything = barca.get("b", "pipeline.py", refresh_all=True)
print(json.dumps([first, again, only, everything]))
""")
    assert out == [{"b": 2}] * 4
    assert lines(api / "executed.log") == ["a", "b", "a", "b", "a", "a", "b"]


def test_run_returns_the_task_value(api: Path) -> None:
    out = drive(api, """
import json
from barca import run
print(json.dumps(run("publish", "pipeline.py")))
""")
    assert out == "published 2"


def test_run_is_callable_after_get(api: Path) -> None:
    out = drive(api, """
import json, barca
barca.get("b", "pipeline.py")
print(json.dumps(barca.run("publish", "pipeline.py")))
""")
    assert out == "published 2"


def test_errors_raise_the_classes_the_cli_maps_to_exit_codes(api: Path) -> None:
    out = drive(api, """
import json, barca

def catch(call):
    try:
        call()
    except barca.BarcaError as exc:
        return {"class": type(exc).__name__, "code": exc.code, "kind": exc.kind,
                "remediation": exc.remediation,
                "node": getattr(exc, "node", None)}
    return None

print(json.dumps({
    "unknown": catch(lambda: barca.get("nope", "pipeline.py")),
    "task_via_get": catch(lambda: barca.get("publish", "pipeline.py")),
    "failed": catch(lambda: barca.get("broken", "pipeline.py")),
}))
""")
    assert out["unknown"]["class"] == "UsageError" and out["unknown"]["code"] == 2
    assert out["unknown"]["kind"] == "usage" and out["unknown"]["remediation"]
    assert out["task_via_get"]["class"] == "UsageError"
    assert out["failed"]["class"] == "StepFailed" and out["failed"]["code"] == 1
    assert out["failed"]["node"] == "pipeline.py:broken"
    # the CLI gives the same codes for the same situations
    assert barca(api, "get", "nope", "pipeline.py").code == 2
    assert barca(api, "get", "publish", "pipeline.py").code == 2
    assert barca(api, "get", "broken", "pipeline.py").code == 1


def test_bad_definition_raises_usage_error_naming_the_file(api: Path) -> None:
    (api / "bad.py").write_text("from barca import asset\n\n@asset(retires=2)\n"
                                "def x() -> int:\n    return 1\n")
    out = drive(api, """
import json, barca
try:
    barca.get("b")
    print(json.dumps(None))
except barca.UsageError as exc:
    print(json.dumps({"message": str(exc), "remediation": exc.remediation}))
""")
    assert "bad.py" in out["message"] and "retires" in out["message"]
    assert not (api / ".barca").exists()
