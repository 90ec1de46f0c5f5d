"""Kill trials: `kill -9` one process of a run over a 300-key pipeline at a random moment, then
run again and check what barca promises (`barca docs reliability`):

- the rerun succeeds and every value is right (the total of all 300 keys, read back from
  their artifacts, is the expected sum);
- the metadata database passes SQLite's integrity check;
- every key recorded done before the rerun reads back as it was written, from its own file or
  its range of a pack (the 300 results are small, so a kill often lands while a worker writes
  a pack or reports the keys in it);
- no step recorded as done before the kill runs again (a step that finished but was not yet
  recorded may; that is what a kill can cost).

Used by `tests/reliability/test_kill_trials.py` (a few trials, in CI) and by
`benchmarks/soak.py` (hundreds). Each trial edits the pipeline (a new salt in the step's
body), so every trial starts with all 300 keys to compute.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

from barca.store.packs import split_range
from conftest import pool_processes

KEYS = 300
TARGETS = ("command", "process group", "forked run", "worker", "pool", "fresh command")
CLI = [sys.executable, "-m", "barca.cli.main"]

PIPELINE = """
import os
import time
from barca import asset, collect, partitions

KEYS = [f"k{{i:03d}}" for i in range({keys})]


@asset(partitions={{"key": partitions(KEYS)}})
def scored(key: str) -> int:
    time.sleep(0.005)
    with open("executed.log", "a") as log:
        log.write(f"{{key}} {{os.getpid()}}\\n")
    return int(key[1:]) * 7 + {salt}


@asset(inputs={{"all": collect(scored)}})
def total(all: list) -> int:
    return sum(all)
"""


def expected_total(salt: int) -> int:
    return sum(i * 7 + salt for i in range(KEYS))


@dataclass
class Outcome:
    target: str
    delay: float
    killed: bool  # False: the run ended before there was anything of that kind to kill
    recorded_before: int  # keys recorded done before the rerun
    rerun: int  # keys the rerun executed
    rerun_of_recorded: list[str]  # must stay empty
    unreadable: list[str]  # keys recorded done whose bytes could not be read back: empty
    total_ok: bool
    integrity: str
    rerun_code: int
    rerun_stderr: str

    @property
    def ok(self) -> bool:
        return self.total_ok and self.integrity == "ok" and not self.rerun_of_recorded \
            and not self.unreadable and self.rerun_code == 0


def environment(state_dir: Path, pooled: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BARCA_")}
    env.pop("XDG_RUNTIME_DIR", None)
    env.update(TMPDIR=str(state_dir), BARCA_WARM_SECONDS="120" if pooled else "0")
    return env


def trial(root: Path, state_dir: Path, target: str, salt: int, rng: random.Random) -> Outcome:
    """One trial in project `root` (already holding a barca.toml); `state_dir`: the TMPDIR of
    its warm pool."""
    (root / "p.py").write_text(textwrap.dedent(PIPELINE.format(keys=KEYS, salt=salt)))
    log = root / "executed.log"
    log.unlink(missing_ok=True)
    env = environment(state_dir, pooled=target != "fresh command")
    delay = rng.uniform(0.0, 1.0)
    started = time.time()
    proc = subprocess.Popen([*CLI, "get", "total", "p.py"], cwd=root, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    killed = _kill(root, proc, target, delay)
    try:
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    recorded = _recorded_keys(root, started)
    unreadable = _unreadable(root, started)
    log.unlink(missing_ok=True)
    rerun = subprocess.run([*CLI, "get", "total", "p.py", "--json"], cwd=root, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=120)
    executed = [line.split()[0] for line in _lines(log)]
    total_ok = False
    if rerun.returncode == 0:
        import json

        total_ok = json.loads(rerun.stdout)["final_output"] == expected_total(salt)
    return Outcome(target, delay, killed, len(recorded), len(executed),
                   sorted(set(executed) & recorded), unreadable, total_ok, _integrity(root),
                   rerun.returncode, rerun.stderr[-2000:])


def _kill(root: Path, proc: subprocess.Popen, target: str, delay: float) -> bool:
    """Kill the target `delay` seconds after the first step began (so that the kill lands
    anywhere in the steps' work, not in the start-up before it), or as soon after as one
    exists; False if the run ended first."""
    log = root / "executed.log"
    while not log.exists() and proc.poll() is None:
        time.sleep(0.005)
    deadline = time.monotonic() + delay
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    while proc.poll() is None:
        pid = _find(root, proc, target)
        if pid is not None:
            try:
                if target == "process group":
                    os.killpg(pid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
                return True
            except ProcessLookupError:
                pass
        time.sleep(0.01)
    return False


def _find(root: Path, proc: subprocess.Popen, target: str) -> int | None:
    if target in ("command", "process group", "fresh command"):
        return proc.pid
    if target == "pool":
        pools = pool_processes(root)
        return pools[0] if pools else None
    if target == "forked run":
        pid = _newest_run_pid(root)
        return pid if pid not in (None, proc.pid) else None
    lines = _lines(root / "executed.log")  # target == "worker": one that ran a step
    return int(lines[-1].split()[1]) if lines else None


def stop_pools(root: Path) -> None:
    for pid in pool_processes(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except OSError:
        return []


def _connect(root: Path) -> sqlite3.Connection | None:
    path = root / ".barca" / "metadata.db"
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True) if path.exists() else None


def _newest_run_pid(root: Path) -> int | None:
    conn = _connect(root)
    if conn is None:
        return None
    try:
        row = conn.execute("SELECT pid FROM runs WHERE status = 'running' "
                           "ORDER BY started_at DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return row[0] if row else None


def _recorded_keys(root: Path, since: float) -> set[str]:
    """Keys of `scored` recorded done by runs started since `since` (this trial's)."""
    conn = _connect(root)
    if conn is None:
        return set()
    try:
        rows = conn.execute(
            "SELECT m.key FROM materializations m JOIN runs r ON r.run_id = m.run_id "
            "WHERE m.node_id = 'p.py:scored' AND m.status = 'success' AND r.started_at >= ?",
            (since,)).fetchall()
    finally:
        conn.close()
    return {key for (key,) in rows}


def _unreadable(root: Path, since: float) -> list[str]:
    """Keys of `scored` recorded done since `since` whose bytes are not where their row says,
    as they were written (the output digest): a packed result's range of its pack included.
    Read as the kill left them, before anything runs again."""
    conn = _connect(root)
    if conn is None:
        return []
    try:
        rows = conn.execute(
            "SELECT m.key, m.artifact_path, m.output_hash FROM materializations m JOIN runs r "
            "ON r.run_id = m.run_id WHERE m.node_id = 'p.py:scored' AND "
            "m.status = 'success' AND r.started_at >= ?", (since,)).fetchall()
    finally:
        conn.close()
    bad = []
    for key, path, digest in rows:
        file, offset, length = split_range(path)
        try:
            with open(root / file, "rb") as fh:
                fh.seek(offset or 0)
                data = fh.read(length) if length is not None else fh.read()
        except OSError:
            data = None
        if data is None or hashlib.blake2b(data, digest_size=16).hexdigest() != digest:
            bad.append(key)
    return sorted(bad)


def _integrity(root: Path) -> str:
    conn = _connect(root)
    if conn is None:
        return "no database"
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()
