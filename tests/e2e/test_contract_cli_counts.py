"""Counts a user reads must agree: the progress lines and the summary of a run whose keys come
from a sensor, and what a cancelled run says it did (steps, cached keys, the keys it never
reached)."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
from pathlib import Path

from conftest import CLI, barca, barca_env, read_pty, start_barca, wait_for, write

SENSOR_KEYS = """
from barca import asset, collect, partitions_from, sensor

@sensor()
def keys() -> list:
    return [f"k{i}" for i in range(5)]

@asset(partitions={"k": partitions_from(keys)})
def per(k: str) -> str:
    return k

@asset(inputs={"per": collect(per)})
def total(per: list) -> int:
    return len(per)
"""

GATED = """
import time
from pathlib import Path
from barca import asset, collect, partitions

@asset(partitions={"k": partitions([f"k{i}" for i in range(6)])})
def slow(k: str) -> str:
    if k != "k0":
        Path(f"waiting-{k}").write_text("")
        deadline = time.monotonic() + 60
        while not Path("gate").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    return k

@asset(inputs={"slow": collect(slow)})
def after(slow: list) -> int:
    return len(slow)
"""


def test_step_counts_continue_from_the_sensor_to_the_run_summary(project: Path) -> None:
    write(project, {"pipeline.py": SENSOR_KEYS})
    result = barca(project, "get", "total", "pipeline.py", "--agent").expect(0)
    counts = re.findall(r"^\[barca\] step:\S+ completed [0-9.]+s \((\d+)/(\d+)\)$",
                        result.stderr, re.M)
    assert [int(n) for n, _ in counts] == list(range(1, 8))  # sensor, 5 keys, total
    assert {int(t) for _, t in counts[1:]} == {7}
    assert re.search(r"^\[barca\] 7/7 steps \| done in", result.stderr, re.M)
    assert result.json["steps_executed"] == 7


def test_progress_bar_counts_to_the_same_total_as_the_summary(project: Path) -> None:
    """stderr on a terminal draws the bar: after the sensor it continues at 1 of 7 (the
    sensor's key counted), never restarts at 0 of the remaining 6."""
    write(project, {"pipeline.py": SENSOR_KEYS})
    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, "get", "total", "pipeline.py"], cwd=project,
                            env=barca_env(), stdout=subprocess.PIPE, stderr=slave,
                            stdin=subprocess.DEVNULL)
    os.close(slave)
    printed = read_pty(master)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", printed.decode(errors="replace"))
    counts = re.findall(r"(\d+)/(\d+) steps", drawn)
    assert ("7", "7") in counts  # the summary line
    assert len(counts) > 1, drawn  # and the bar
    assert {total for _, total in counts} == {"7"}, drawn


def test_cancelled_run_counts_only_what_it_did(project: Path) -> None:
    write(project, {"pipeline.py": GATED})
    env = {"BARCA_POOL_SIZE": "2"}
    proc = start_barca(project, "get", "after", "pipeline.py", "--agent", env=env)
    try:
        wait_for(lambda: len(list(project.glob("waiting-*"))) == 2, "two keys in flight",
                 timeout=30)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        (project / "gate").write_text("")
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert re.search(r"^\[barca\] 1/7 steps \| cancelled after", err, re.M), err
    run = barca(project, "history").expect(0).json["runs"][0]
    assert run["status"] == "cancelled"
    assert (run["steps_executed"], run["steps_cached"], run["steps_total"]) == (1, 0, 7)
    human = barca(project, "history", "--pretty").expect(0).stdout.splitlines()
    assert human[1].split()[4:6] == ["1", "0"]  # STEPS 1, CACHED 0
    dry = barca(project, "get", "after", "pipeline.py", "--dry-run", "--pretty").expect(0)
    slow = next(line for line in dry.stdout.splitlines() if line.endswith("pipeline.py:slow"))
    assert "1 of 6 keys cached; will run: k=k1 (never computed), k=k2 (never computed)" in slow
    assert "new key" not in dry.stdout
