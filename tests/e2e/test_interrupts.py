"""Interrupted runs: kill -9 keeps what was recorded; Ctrl-C stops workers and exits 130.

The kill -9 test pauses the run at a known point instead of guessing with sleeps: fast steps
finish, the remaining steps wait on a gate file, and `barca status` (run beside the live run)
tells when the finished steps are recorded. Then the coordinator is killed, the gate opens so
orphaned workers exit, and the next `get` must rerun exactly the steps not recorded.
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest

from conftest import barca, lines, run_statuses, start_barca, wait_for, write

STEPS = 200
FAST = 120  # s000..s119 finish at once; the rest wait on the gate


def _two_hundred_steps() -> str:
    out = ["import os, time", "from pathlib import Path", "from barca import asset", "",
           "def _work(i, gated):",
           "    if gated:",
           "        Path(f'waiting-{i}').write_text('')",
           "        deadline = time.monotonic() + 30",
           "        while not Path('gate').exists() and time.monotonic() < deadline:",
           "            time.sleep(0.01)",
           "    with open('executed.log', 'a') as fh:",
           "        fh.write(f'{i}\\n')",
           "    return {'i': i, 'payload': 'x' * 2000}", ""]
    for i in range(STEPS):
        out += ["@asset()", f"def s{i:03d}() -> dict:", f"    return _work({i}, {i >= FAST})",
                ""]
    return "\n".join(out)



def test_kill_9_mid_run_reruns_only_unrecorded_steps_and_keeps_artifacts_intact(
        project: Path) -> None:
    (project / "p.py").write_text(_two_hundred_steps())
    env = {"BARCA_POOL_SIZE": "2"}
    proc = start_barca(project, "get", "p.py", env=env)
    try:
        # both workers are now inside a gated step, with the fast steps they could reach done
        wait_for(lambda: len(list(project.glob("waiting-*"))) == 2, "two gated steps",
                 timeout=30)
        finished = set(lines(project / "executed.log"))
        assert finished and len(finished) < STEPS

        def recorded() -> int:
            status = barca(project, "status", "p.py")
            return status.json["summary"]["cached"] if status.code == 0 else -1
        wait_for(lambda: recorded() == len(finished), "the finished steps to be recorded",
                 timeout=30)
    finally:
        proc.kill()  # SIGKILL to the barca process only; its workers die with it
        (project / "gate").write_text("")  # (a worker that sees the gate first may be cut
        # off while writing its artifact: its temporary file is left for gc)
        proc.communicate(timeout=30)  # (they hold its stderr open until then)
    assert proc.returncode == -signal.SIGKILL
    assert run_statuses(project) in (["running"], ["interrupted"])  # never "success"

    dry = barca(project, "get", "p.py", "--dry-run", env=env).expect(0)
    summary = dry.json["summary"]
    assert (summary["will_run"], summary["cached"], summary["unknown"]) == (
        STEPS - len(finished), len(finished), 0)
    result = barca(project, "get", "p.py", env=env).expect(0)
    status = result.statuses()
    cached = {name for name, s in status.items() if s == "cached"}
    ran = {name for name, s in status.items() if s == "ran"}
    assert cached == {f"s{int(i):03d}" for i in finished}
    assert ran == {f"s{i:03d}" for i in range(STEPS)} - cached
    assert result.json["steps_executed"] == STEPS - len(finished)

    for i in range(STEPS):  # every recorded artifact reads back intact
        step = result.steps[f"s{i:03d}"]
        path = project / ".barca" / "artifacts" / f"p.py--s{i:03d}" / f"{step['run_hash']}.json"
        assert json.loads(path.read_bytes()) == {"i": i, "payload": "x" * 2000}
    def leftovers() -> list[Path]:
        return [p for p in (project / ".barca" / "artifacts").rglob("*")
                if p.is_file() and not p.name.endswith(".json")]
    assert all(re.fullmatch(r"\..+\.json\.\d+\.tmp", p.name) for p in leftovers())
    barca(project, "gc").expect(0)  # temporary files of dead workers go; results stay
    assert leftovers() == []
    assert len(list((project / ".barca" / "artifacts").rglob("*.json"))) == STEPS


SLOW = """
    import os
    import time
    from pathlib import Path
    from barca import asset

    @asset()
    def quick() -> int:
        return 1

    @asset(inputs={"q": quick})
    def slow(q: int) -> int:
        Path("worker.pid").write_text(str(os.getpid()))
        time.sleep(30)
        Path("finished").write_text("")
        return q
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_stops_workers_records_cancelled_and_exits_130(project: Path, sig) -> None:
    write(project, {"p.py": SLOW})
    proc = start_barca(project, "get", "slow", "p.py")
    try:
        wait_for(lambda: (project / "worker.pid").exists()
                 and (project / "worker.pid").read_text(), "the slow step to start", timeout=30)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    envelope = json.loads(err.strip().splitlines()[-1])
    assert envelope["kind"] == "cancelled" and envelope["code"] == 130
    worker = int((project / "worker.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)  # the worker was stopped, not left running
    assert not (project / "finished").exists()
    assert run_statuses(project) == ["cancelled"]

    # what finished before the interrupt was kept
    dry = barca(project, "get", "slow", "p.py", "--dry-run").expect(0)
    assert dry.statuses() == {"quick": "cached", "slow": "run"}
