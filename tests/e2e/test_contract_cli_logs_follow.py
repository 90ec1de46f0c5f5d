"""`barca logs -f` follows a running run: the lines already written, then the ones written
while it follows, and it ends when the run ends, with the run's exit code."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import CLI, barca, barca_env, start_barca, wait_for, write

GATED = """
import time
from pathlib import Path
from barca import asset

@asset()
def slow() -> int:
    print("first line", flush=True)
    Path("waiting").write_text("")
    deadline = time.monotonic() + 60
    while not Path("gate").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    print("second line", flush=True)
    if Path("fail").exists():
        raise ValueError("gate said fail")
    return 1
"""


def _follow_a_gated_run(project: Path, *follow_args: str) -> tuple[subprocess.Popen, str]:
    """Start the run, wait until its first line is recorded, start `logs -f`, open the gate;
    returns the finished follower and the run's id."""
    run = start_barca(project, "get", "slow", "pipeline.py")
    try:
        wait_for(lambda: (project / "waiting").exists(), "the step to wait on its gate")
        runs = barca(project, "history").expect(0).json["runs"]
        assert runs[0]["status"] == "running"
        run_id = runs[0]["run_id"]
        wait_for(lambda: "first line" in barca(project, "logs", run_id).stdout,
                 "the first line to be recorded")
        follower = subprocess.Popen([*CLI, "logs", "-f", *follow_args], cwd=project,
                                    env=barca_env(), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
    finally:
        (project / "gate").write_text("")
        run.communicate(timeout=60)
    follower.wait(timeout=60)
    return follower, run_id


def test_follow_prints_old_and_new_lines_and_ends_with_the_run(project: Path) -> None:
    write(project, {"pipeline.py": GATED})
    follower, run_id = _follow_a_gated_run(project)
    out, err = follower.communicate()
    assert follower.returncode == 0, err
    assert out.splitlines() == ["[pipeline.py:slow] first line",
                                "[pipeline.py:slow] second line"]
    assert f"run {run_id} ended: success" in err


def test_follow_of_a_failing_run_exits_1_with_json_lines(project: Path) -> None:
    write(project, {"pipeline.py": GATED})
    (project / "fail").write_text("")
    follower, run_id = _follow_a_gated_run(project, "--json", "--step", "slow")
    out, err = follower.communicate()
    assert follower.returncode == 1
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["line"] for line in lines] == ["first line", "second line"]
    assert all(line["step_id"] == "pipeline.py:slow" for line in lines)
    envelope = json.loads(err.strip().splitlines()[-1])
    assert envelope["kind"] == "step_failed" and run_id in envelope["error"]
    assert "gate said fail" in envelope["error"]


def test_follow_of_a_finished_run_prints_it_and_exits(project: Path) -> None:
    write(project, {"pipeline.py": GATED})
    (project / "gate").write_text("")
    barca(project, "get", "slow", "pipeline.py").expect(0)
    done = barca(project, "logs", "-f").expect(0)
    assert done.stdout.splitlines() == ["[pipeline.py:slow] first line",
                                        "[pipeline.py:slow] second line"]
    refused = barca(project, "logs", "-f", "--pretty").expect(2)
    assert "--follow" in refused.stderr and refused.stdout == ""
