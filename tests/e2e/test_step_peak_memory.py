"""A step's `max_rss_bytes` is its own peak, not its worker's since it started (issue 27,
item 6; `barca docs history`).

One worker (BARCA_POOL_SIZE=1) runs a heavy step that fills 200 MB and then, reading its
output, a light step and a light batch call: those report far less than the heavy step did.
A step whose `parallel()` branch fills 200 MB reports the branch's peak, which runs in a
process of its own. Each step logs its process id to pids.log, so that "the same worker" is
checked, not assumed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from conftest import barca, stop_pools, wait_until_ready, write

MB = 1 << 20
SIZE = 200 * MB

PIPELINE = f"""
    import os
    from barca import asset, parallel, partitions, task

    def _log(node):
        with open("pids.log", "a") as fh:
            fh.write(f"{{node}} {{os.getpid()}} {{os.getppid()}}\\n")

    def _fill():
        block = b"x" * {SIZE}  # every page written, so all of it is resident
        return len(block)

    @asset()
    def heavy() -> int:
        _log("heavy")
        return _fill()

    @asset(inputs={{"heavy": heavy}})
    def light(heavy: int) -> int:
        _log("light")
        return heavy + 1

    @asset(partitions={{"part": partitions(["a", "b"])}}, inputs={{"heavy": heavy}}, batch="all")
    def light_batch(part: list, heavy: int) -> dict:
        _log("light_batch")
        return {{key: heavy for key in part}}

    @task()
    def fanned() -> int:
        _log("fanned")
        return parallel(_fill)[0]
"""


def peaks(root: Path, run_id: str) -> dict[str, list[int]]:
    """node name -> the max_rss_bytes of its steps in the run, from `history RUN --json`."""
    out: dict[str, list[int]] = {}
    for step in barca(root, "history", run_id, "--json").expect(0).json["steps"]:
        out.setdefault(step["node_id"].rpartition(":")[2], []).append(step["max_rss_bytes"])
    return out


def logged_pids(root: Path) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for line in (root / "pids.log").read_text().splitlines():
        node, pid, _ = line.split()
        out.setdefault(node, set()).add(int(pid))
    return out


def test_a_light_step_after_a_heavy_one_on_the_same_worker_reports_its_own_peak(
        project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    run = barca(project, "get", "light,light_batch", "pipeline.py",
                env={"BARCA_POOL_SIZE": "1"}).expect(0).json
    pids = logged_pids(project)
    assert len(pids["heavy"] | pids["light"] | pids["light_batch"]) == 1, pids  # one worker
    found = peaks(project, run["run_id"])
    [heavy] = found["heavy"]
    assert heavy >= SIZE, found
    [light] = found["light"]
    assert light < heavy / 2, found
    assert len(found["light_batch"]) == 2 and all(p < heavy / 2 for p in found["light_batch"]), \
        found


def test_a_parallel_branch_peak_counts_for_its_step(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    run = barca(project, "run", "fanned", "pipeline.py", env={"BARCA_POOL_SIZE": "1"})
    found = peaks(project, run.expect(0).json["run_id"])
    [fanned] = found["fanned"]
    assert fanned >= SIZE, found


@pytest.fixture
def warm_project(project: Path):
    yield project
    stop_pools(project)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the warm pool is Linux-only")
def test_a_forked_worker_reports_each_step_its_own_peak(warm_project: Path) -> None:
    """A warm pool's worker is forked, so its peaks are read with getrusage alone
    (engine.peak_memory): still each step's own, after a heavy step on the same worker."""
    project = warm_project
    env = {"BARCA_POOL_SIZE": "1", "BARCA_WARM_SECONDS": "60"}
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "light", "pipeline.py", env=env).expect(0)
    pool = wait_until_ready(project)
    (project / "pids.log").unlink()
    run = barca(project, "get", "light,light_batch", "pipeline.py", "--refresh",
                "heavy,light,light_batch", env=env).expect(0).json
    logged = [line.split() for line in (project / "pids.log").read_text().splitlines()]
    assert {(pid, parent) for _, pid, parent in logged} == \
        {(logged[0][1], str(pool))}, logged  # one worker, forked by the pool
    found = peaks(project, run["run_id"])
    [heavy] = found["heavy"]
    assert heavy >= SIZE, found
    [light] = found["light"]
    assert 0 < light < heavy / 2, found
    assert len(found["light_batch"]) == 2 and all(0 < p < heavy / 2
                                                  for p in found["light_batch"]), found
