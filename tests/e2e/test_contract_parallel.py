"""`parallel()` / `parallel_map()` inside a step: branches fan out, results come back in
argument order, and failures are collected into one `ParallelError` after every branch ended.

In a worker (a real `barca run`) the branches are forked processes, at most BARCA_POOL_SIZE at
a time; in a plain Python script they run one after the other. Concurrency is shown with a
barrier (each branch waits until all have started), never with timings.
"""

from __future__ import annotations

from pathlib import Path

from conftest import barca, drive, write

PIPELINE = """
import functools, os, time
from pathlib import Path
from barca import ParallelError, asset, parallel, parallel_map, task

def arrive(name: str, expected: int) -> None:
    \"\"\"A barrier: returns once `expected` branches have arrived (raises after 30 s).\"\"\"
    Path("arrived").mkdir(exist_ok=True)
    Path("arrived", name).touch()
    deadline = time.monotonic() + 30
    while len(os.listdir("arrived")) < expected:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(os.listdir('arrived'))} of {expected} arrived")
        time.sleep(0.01)

def fetch(region: str, together: int = 0) -> dict:
    if together:
        arrive(region, together)
    print(f"fetched {region}")
    if region.startswith("bad"):
        raise ValueError(f"no data for {region}")
    Path("done").mkdir(exist_ok=True)
    Path("done", region).touch()
    return {"region": region, "pid": os.getpid()}

def running(i: int) -> int:
    \"\"\"How many branches run at once, seen from inside: the most this one saw.\"\"\"
    Path("running").mkdir(exist_ok=True)
    Path("running", str(i)).touch()
    seen = 0
    for _ in range(20):
        seen = max(seen, len(os.listdir("running")))
        time.sleep(0.01)
    Path("running", str(i)).unlink()
    return seen

def scale(x: int, factor: int = 1) -> int:
    return x * factor

def nested(group: str) -> list:
    return parallel_map(scale, [1, 2, 3], factor=len(group))

def unpicklable() -> object:
    return lambda: 1

@task()
def together() -> dict:
    out = parallel_map(fetch, ["emea", "amer", "apac", "latam"], together=4)
    return {"regions": [o["region"] for o in out], "pids": [o["pid"] for o in out],
            "me": os.getpid()}

@task()
def bounded() -> list:
    return parallel_map(running, range(6))

@task()
def collected() -> dict:
    try:
        parallel(functools.partial(fetch, "bad1"), functools.partial(fetch, "ok1"),
                 functools.partial(fetch, "bad2"), functools.partial(scale, 3, factor=2))
    except ParallelError as exc:
        return {"message": str(exc),
                "failures": [[f.index, f.function, f.error_type, f.message]
                             for f in exc.failures],
                "traceback": exc.failures[0].traceback,
                "results": [r if i not in {f.index for f in exc.failures} else repr(r)
                            for i, r in enumerate(exc.results)]}
    return {}

@task()
def raises() -> int:
    parallel(functools.partial(fetch, "bad3"), functools.partial(fetch, "ok2"))
    return 1

@task()
def mixed() -> dict:
    return {"mixed": parallel(functools.partial(scale, 2, factor=5), functools.partial(nested, "ab"),
                              lambda: "plain"),
            "empty": parallel(), "one": parallel_map(scale, [7])}

@task()
def cannot_return() -> str:
    try:
        parallel(unpicklable, functools.partial(scale, 1))
    except ParallelError as exc:
        return exc.failures[0].error_type + ": " + exc.failures[0].message
    return "no error"

COUNTER = {"n": 0}

def bump() -> int:
    COUNTER["n"] += 1
    return COUNTER["n"]

@task()
def isolated() -> list:
    return [parallel(bump, bump), COUNTER["n"]]

@asset()
def squares() -> list:
    return parallel_map(scale, [1, 2, 3], factor=3)
"""


def _project(project: Path) -> Path:
    return write(project, {"pipeline.py": PIPELINE})


def test_branches_run_at_once_in_forked_processes_results_in_argument_order(
        project: Path) -> None:
    _project(project)
    result = barca(project, "run", "together", "pipeline.py",
                   env={"BARCA_POOL_SIZE": "4"}).expect(0)
    out = result.json["final_output"]
    assert out["regions"] == ["emea", "amer", "apac", "latam"]
    assert len(set(out["pids"])) == 4 and out["me"] not in out["pids"]
    # what a branch prints is its step's output
    run_id = result.json["run_id"]
    logs = barca(project, "logs", run_id, "--step", "together").expect(0).stdout.splitlines()
    assert sorted(logs) == ["fetched amer", "fetched apac", "fetched emea", "fetched latam"]


def test_no_more_branches_run_at_once_than_the_pool_has_workers(project: Path) -> None:
    _project(project)
    seen = barca(project, "run", "bounded", "pipeline.py",
                 env={"BARCA_POOL_SIZE": "2"}).expect(0).json["final_output"]
    assert len(seen) == 6 and max(seen) <= 2


def test_failures_are_collected_into_one_parallel_error_after_every_branch_ended(
        project: Path) -> None:
    _project(project)
    out = barca(project, "run", "collected", "pipeline.py",
                env={"BARCA_POOL_SIZE": "2"}).expect(0).json["final_output"]
    assert out["failures"] == [
        [0, "fetch('bad1')", "ValueError", "no data for bad1"],
        [2, "fetch('bad2')", "ValueError", "no data for bad2"]]
    assert out["message"] == ("2 of 4 parallel branches failed: [0] fetch('bad1'): "
                              "ValueError: no data for bad1; [2] fetch('bad2'): ValueError: "
                              "no data for bad2")
    assert out["results"][1]["region"] == "ok1" and out["results"][3] == 6
    assert out["results"][0] == "BranchFailure(\"[0] fetch('bad1'): ValueError: no data for bad1\")"
    assert out["results"][2].startswith("BranchFailure(\"[2] fetch('bad2')")
    assert 'raise ValueError(f"no data for {region}")' in out["traceback"]
    assert sorted(p.name for p in (project / "done").iterdir()) == ["ok1"]


def test_an_uncaught_parallel_error_fails_the_step_naming_each_branch(project: Path) -> None:
    _project(project)
    failed = barca(project, "run", "raises", "pipeline.py").expect(1)
    assert failed.envelope["error"] == (
        "step 'pipeline.py:raises' failed: ParallelError: 1 of 2 parallel branches failed: "
        "[0] fetch('bad3'): ValueError: no data for bad3")
    trace = failed.envelope["traceback"]
    assert "branch [0] fetch('bad3')" in trace and "in fetch" in trace
    assert "fanout.py" not in trace  # the user's frames only
    assert (project / "done" / "ok2").exists()  # the other branch ran to its end


def test_nested_fan_out_mixed_callables_and_unpicklable_results(project: Path) -> None:
    _project(project)
    out = barca(project, "run", "mixed", "pipeline.py").expect(0).json["final_output"]
    assert out == {"mixed": [10, [2, 4, 6], "plain"], "empty": [], "one": [7]}
    message = barca(project, "run", "cannot_return", "pipeline.py").expect(0).json[
        "final_output"]
    assert message.startswith("BranchResultError: the branch returned a function, which "
                              "cannot be passed back")
    assert barca(project, "get", "squares", "pipeline.py").expect(0).json[
        "final_output"] == [3, 6, 9]
    # each branch works on its own copy of the process: the caller's globals stay as they were
    assert barca(project, "run", "isolated", "pipeline.py").expect(0).json[
        "final_output"] == [[1, 1], 0]


def test_outside_a_worker_branches_run_one_after_the_other(project: Path) -> None:
    _project(project)
    out = drive(project, """
import json, os, pipeline
from barca import ParallelError, parallel

collected = pipeline.collected()
mixed = pipeline.mixed()
isolated = pipeline.isolated()
try:
    parallel(1)
    bad_argument = None
except TypeError as exc:
    bad_argument = str(exc)
print(json.dumps({"collected": collected, "mixed": mixed, "bad_argument": bad_argument,
                  "isolated": isolated,
                  "pid": os.getpid(), "fetched": pipeline.fetch("x")["pid"]}))
""")
    assert out["fetched"] == out["pid"]  # in this process, one after the other
    assert [f[0] for f in out["collected"]["failures"]] == [0, 2]
    assert out["collected"]["results"][1]["pid"] == out["pid"]
    assert out["mixed"] == {"mixed": [10, [2, 4, 6], "plain"], "empty": [], "one": [7]}
    assert out["bad_argument"].startswith("parallel() takes callables")
    assert out["isolated"] == [[1, 2], 2]  # one after the other, in this very process
