"""Worker processes: pool size, parallelism, one import per worker, retries, timeouts, failures.

Steps record facts about where they ran (pid) into files; parallelism is proven with a
rendezvous (each step waits for the other to have started), never with timings.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from conftest import barca, lines, run_statuses, start_barca, write

MEET = """
    import os
    import time
    from pathlib import Path
    from barca import asset

    with open("imports.log", "a") as _fh:
        _fh.write(f"{os.getpid()}\\n")

    def _meet(me, others, wait=3.0):
        # True when every other step started while this one was running
        Path(f"{me}.here").write_text(str(os.getpid()))
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if all(Path(f"{o}.here").exists() for o in others):
                return True
            time.sleep(0.01)
        return False
"""


def _pids(root: Path, result) -> set[int]:
    values = [json.loads(next((root / ".barca" / "artifacts" / f"p.py--{name}").iterdir())
                         .read_bytes()) for name in result.steps]
    return {v["pid"] if isinstance(v, dict) else v for v in values}


def _many(n: int) -> str:
    return "".join(f"""
    @asset()
    def s{i:02d}() -> int:
        return os.getpid()
""" for i in range(n))


def test_independent_steps_run_in_parallel(project: Path) -> None:
    write(project, {"p.py": MEET + """
    @asset()
    def left() -> dict:
        return {"met": _meet("left", ["right"]), "pid": os.getpid()}

    @asset()
    def right() -> dict:
        return {"met": _meet("right", ["left"]), "pid": os.getpid()}
    """})
    result = barca(project, "get", "left,right", "p.py", env={"BARCA_POOL_SIZE": "2"}).expect(0)
    assert barca(project, "get", "left", "p.py").json["final_output"]["met"] is True
    assert barca(project, "get", "right", "p.py").json["final_output"]["met"] is True
    assert len(_pids(project, result)) == 2


def test_reader_starts_when_its_input_finishes_beside_a_running_step(project: Path) -> None:
    write(project, {"p.py": MEET + """
    @asset()
    def a() -> int:
        return 1

    @asset(inputs={"a": a})
    def reader(a: int) -> dict:
        return {"met": _meet("reader", ["slow"]), "pid": os.getpid()}

    @asset()
    def slow() -> dict:
        return {"met": _meet("slow", ["reader"]), "pid": os.getpid()}
    """})
    barca(project, "get", "reader,slow", "p.py", env={"BARCA_POOL_SIZE": "2"}).expect(0)
    assert barca(project, "get", "reader", "p.py").json["final_output"]["met"] is True
    assert barca(project, "get", "slow", "p.py").json["final_output"]["met"] is True


def test_independent_steps_run_in_parallel_when_many_are_queued(project: Path) -> None:
    write(project, {"p.py": MEET + """
    @asset()
    def left() -> dict:
        return {"met": _meet("left", ["right"]), "pid": os.getpid()}

    @asset()
    def right() -> dict:
        return {"met": _meet("right", ["left"]), "pid": os.getpid()}
    """ + _many(8)})
    barca(project, "get", "p.py", env={"BARCA_POOL_SIZE": "2"}).expect(0)
    assert barca(project, "get", "left", "p.py").json["final_output"]["met"] is True


def test_default_pool_size_is_the_number_of_cores(project: Path) -> None:
    cores = os.cpu_count() or 1
    write(project, {"p.py": MEET + _many(1)})
    assert barca(project, "plan", "p.py").expect(0).json["pool_size"] == cores
    if cores < 2:
        pytest.skip("one core: nothing runs side by side by default")
    width = min(cores, 4)
    names = [f"m{i}" for i in range(width)]
    (project / "p.py").write_text((project / "p.py").read_text() + "".join(f"""
@asset()
def {n}() -> dict:
    return {{"met": _meet("{n}", {[o for o in names if o != n]!r}), "pid": os.getpid()}}
""" for n in names))
    barca(project, "get", ",".join(names), "p.py").expect(0)  # no BARCA_POOL_SIZE set
    for n in names:
        assert barca(project, "get", n, "p.py").json["final_output"]["met"] is True


def test_pool_of_one_imports_the_module_once_and_runs_every_step(project: Path) -> None:
    write(project, {"p.py": MEET + _many(12)})
    result = barca(project, "get", "p.py", env={"BARCA_POOL_SIZE": "1"}).expect(0)
    assert result.json["steps_executed"] == 12
    pids = _pids(project, result)
    assert len(pids) == 1
    assert lines(project / "imports.log") == [str(pids.pop())]


def test_pool_size_bounds_the_workers_and_each_imports_once(project: Path) -> None:
    write(project, {"p.py": MEET + _many(16)})
    result = barca(project, "get", "p.py", env={"BARCA_POOL_SIZE": "2"}).expect(0)
    pids = _pids(project, result)
    assert 1 <= len(pids) <= 2
    imports = lines(project / "imports.log")
    assert sorted(imports) == sorted(str(p) for p in pids)  # one import per worker


def test_invalid_pool_size_is_a_usage_error(project: Path) -> None:
    write(project, {"p.py": MEET + _many(1)})
    for bad in ("0", "-1", "many"):
        result = barca(project, "get", "p.py", env={"BARCA_POOL_SIZE": bad}).expect(2)
        assert "BARCA_POOL_SIZE" in result.envelope["error"]
    assert not (project / "imports.log").exists()


def test_fully_cached_get_starts_no_worker(project: Path) -> None:
    write(project, {"p.py": MEET + _many(3)})
    barca(project, "get", "p.py").expect(0)
    imports = lines(project / "imports.log")
    cached = barca(project, "get", "p.py").expect(0)
    assert cached.json["steps_executed"] == 0
    assert lines(project / "imports.log") == imports  # user code was not imported again


def test_step_output_is_streamed_to_stderr_with_the_step_id(project: Path) -> None:
    write(project, {"p.py": """
        import sys
        import time
        from pathlib import Path
        from barca import asset

        @asset()
        def talker() -> str:
            print("hello from stdout")
            print("hello from stderr", file=sys.stderr)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:  # released once the test saw both lines
                if Path("release").exists():
                    return "released"
                time.sleep(0.01)
            return "not streamed"
    """})
    proc = start_barca(project, "get", "talker", "p.py")
    seen = []
    for line in proc.stderr:
        seen.append(line.rstrip("\n"))
        if "hello from stderr" in line:
            (project / "release").write_text("")
            break
    rest = proc.stderr.read()
    out = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    assert "[p.py:talker] hello from stdout" in seen
    assert "[p.py:talker] hello from stderr" in seen
    assert json.loads(out)["final_output"] == "released"  # stdout holds only the result
    assert "hello" not in out and "hello" not in rest


def test_retries_run_the_step_again_until_it_succeeds(project: Path) -> None:
    write(project, {"p.py": """
        from pathlib import Path
        from barca import asset

        @asset(retries=3)
        def flaky() -> int:
            with open("attempts.log", "a") as fh:
                fh.write("x\\n")
            n = len(Path("attempts.log").read_text().splitlines())
            if n < 3:
                raise RuntimeError(f"attempt {n} fails")
            return n
    """})
    result = barca(project, "get", "flaky", "p.py").expect(0)
    assert result.json["final_output"] == 3
    assert len(lines(project / "attempts.log")) == 3


def test_retries_exhausted_fail_the_run_after_that_many_attempts(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset

        @asset(retries=2)
        def always_fails() -> int:
            with open("attempts.log", "a") as fh:
                fh.write("x\\n")
            raise RuntimeError("still broken")
    """})
    result = barca(project, "get", "always_fails", "p.py").expect(1)
    assert "still broken" in result.json["error"]
    assert len(lines(project / "attempts.log")) == 2


def test_retry_backoff_waits_before_the_next_attempt(project: Path) -> None:
    write(project, {"p.py": """
        import time
        from pathlib import Path
        from barca import asset

        @asset(retries=2, retry_backoff=0.3)
        def flaky() -> float:
            with open("attempts.log", "a") as fh:
                fh.write(f"{time.monotonic()}\\n")
            stamps = [float(t) for t in Path("attempts.log").read_text().split()]
            if len(stamps) < 2:
                raise RuntimeError("first attempt fails")
            return stamps[1] - stamps[0]
    """})
    gap = barca(project, "get", "flaky", "p.py").expect(0).json["final_output"]
    assert gap >= 0.3  # a lower bound only: the backoff happened at all


def test_timeout_stops_the_step_and_counts_as_an_attempt(project: Path) -> None:
    write(project, {"p.py": """
        import time
        from barca import asset

        @asset(timeout_seconds=1, retries=2)
        def slow() -> int:
            with open("attempts.log", "a") as fh:
                fh.write("x\\n")
            time.sleep(30)
            open("finished", "w").close()
            return 1

        @asset()
        def quick() -> int:
            return 2
    """})
    result = barca(project, "get", "p.py", timeout=25).expect(1)
    assert result.json["failed_node"] == "p.py:slow"
    assert "timed out" in result.json["error"]
    assert result.envelope["kind"] == "step_failed"
    assert len(lines(project / "attempts.log")) == 2
    assert not (project / "finished").exists()
    assert result.steps["quick"]["status"] == "ran"


def test_a_workers_start_up_is_not_its_first_step_s_time(project: Path) -> None:
    """A new worker's first lease is sent as the process starts; the step's timeout counts
    from when the worker begins it, not from the lease, however long the start takes (here a
    `sitecustomize` that sleeps a second in every new interpreter, as a busy machine may)."""
    slow_start = project / "slow_start"
    write(slow_start, {"sitecustomize.py": "import time\ntime.sleep(1.0)\n"})
    write(project, {"p.py": """
        import time
        from barca import asset

        @asset(timeout_seconds=0.5)
        def quick() -> int:
            time.sleep(0.1)
            return 1
    """})
    path = os.pathsep.join(filter(None, [str(slow_start), os.environ.get("PYTHONPATH")]))
    got = barca(project, "get", "quick", "p.py", env={"PYTHONPATH": path}).expect(0)
    assert got.json["final_output"] == 1


def test_a_step_that_ends_just_inside_its_timeout_is_not_timed_out(project: Path) -> None:
    """A worker holds finished outcomes a moment to report many at once (and pack their
    results): one whose step took nearly all of its timeout must leave at once, since the
    pool times a step from the outcome before it to its own."""
    write(project, {"p.py": """
        import time
        from barca import asset, partitions

        @asset(partitions={"k": partitions([f"k{i}" for i in range(12)])}, timeout_seconds=0.6)
        def close_call(k: str) -> str:
            time.sleep(0.45)
            return k
    """})  # one worker, so that its leases hold several steps (reported together)
    got = barca(project, "get", "close_call", "p.py", env={"BARCA_POOL_SIZE": "1"}).expect(0)
    assert got.json["final_output"] == {f"k=k{i}": f"k{i}" for i in range(12)}


FAILING = """
    from barca import asset

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset()
    def a() -> int:
        _ran("a")
        return 1

    @asset(inputs={"a": a})
    def b(a: int) -> int:
        _ran("b")
        raise ValueError("boom in b")

    @asset(inputs={"b": b})
    def d(b: int) -> int:
        _ran("d")
        return b

    @asset()
    def c() -> int:
        _ran("c")
        return 3
"""


def test_failing_step_fails_the_run_and_keeps_every_other_result(project: Path) -> None:
    write(project, {"p.py": FAILING})
    failed = barca(project, "get", "p.py").expect(1)
    body = failed.json
    assert body["status"] == "failed" and body["failed_node"] == "p.py:b"
    assert "boom in b" in body["error"]
    assert failed.steps["a"]["status"] == "ran" and failed.steps["c"]["status"] == "ran"
    assert failed.steps["b"]["status"] == "failed"
    assert failed.steps["d"]["status"] == "skipped"
    assert failed.steps["d"]["reason"] == "upstream_failed"
    assert "d" not in lines(project / "executed.log")
    assert run_statuses(project) == ["failed"]

    (project / "p.py").write_text((project / "p.py").read_text().replace(
        'raise ValueError("boom in b")', "return a + 1"))
    fixed = barca(project, "get", "p.py").expect(0)
    assert fixed.statuses() == {"a": "cached", "b": "ran", "c": "cached", "d": "ran"}
    assert fixed.json["final_output"] in (2, 3)
    assert run_statuses(project) == ["failed", "success"]


def test_step_calling_sys_exit_or_killing_its_worker_fails_with_exit_1(project: Path) -> None:
    write(project, {"p.py": """
        import os
        import sys
        from barca import asset

        @asset()
        def exits() -> int:
            sys.exit(0)

        @asset()
        def kills_worker() -> int:
            os._exit(0)

        @asset()
        def fine() -> int:
            return 1
    """})
    for name in ("exits", "kills_worker"):
        result = barca(project, "get", name, "p.py", timeout=30).expect(1)
        assert result.json["failed_node"] == f"p.py:{name}"
        assert result.envelope["kind"] == "step_failed"
    assert barca(project, "get", "fine", "p.py").expect(0).json["final_output"] == 1
    assert run_statuses(project) == ["failed", "failed", "success"]


def test_metadata_is_sqlite_in_wal_mode(project: Path) -> None:
    write(project, {"p.py": MEET + _many(1)})
    barca(project, "get", "p.py").expect(0)
    conn = sqlite3.connect(f"file:{project / '.barca' / 'metadata.db'}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


def _open_new_database(path: str, barrier, results) -> None:
    from barca.store.db import connect

    barrier.wait()
    try:
        connect(Path(path), create=True).close()
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - the message is the assertion's evidence
        results.put(str(exc))


def test_two_processes_creating_one_new_database_at_once_both_open_it(tmp_path: Path) -> None:
    """Switching a new database to WAL answers "locked" at once, without SQLite's busy
    timeout, while another process creates it: one process in eight failed so before the fix,
    and two first runs started together (below) once failed in CI. Fifteen released-together
    pairs, each on a new file."""
    import multiprocessing

    outcomes = []
    for i in range(15):
        barrier, results = multiprocessing.Barrier(2), multiprocessing.Queue()
        path = str(tmp_path / f"db{i}" / "metadata.db")
        os.makedirs(os.path.dirname(path))
        procs = [multiprocessing.Process(target=_open_new_database,
                                         args=(path, barrier, results)) for _ in range(2)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout=60)
        outcomes += [results.get(timeout=5) for _ in procs]
    assert [o for o in outcomes if o != "ok"] == []


def test_two_gets_on_one_project_at_once_both_finish_correctly(project: Path) -> None:
    names = [f"s{i:02d}" for i in range(30)]
    source = ["import time", "from barca import asset", ""]
    for i, name in enumerate(names):
        source += ["@asset()", f"def {name}() -> int:", "    time.sleep(0.01)",
                   f"    return {i}", ""]
    source += ["@asset(inputs={" + ", ".join(f'"{n}": {n}' for n in names) + "})",
               "def total(" + ", ".join(f"{n}: int" for n in names) + ") -> int:",
               "    return " + " + ".join(names), ""]
    (project / "p.py").write_text("\n".join(source))
    procs = [start_barca(project, "get", "total", "p.py", env={"BARCA_POOL_SIZE": "2"})
             for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert json.loads(out)["final_output"] == sum(range(30))
    assert run_statuses(project) == ["success", "success"]
    after = barca(project, "get", "total", "p.py").expect(0)
    assert after.json["steps_executed"] == 0
    assert after.json["final_output"] == sum(range(30))
