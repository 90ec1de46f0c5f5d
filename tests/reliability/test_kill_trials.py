"""`kill -9` at random moments of runs over a 300-key pipeline: the command, its process group,
the run forked from the warm pool, a worker, the pool itself, and a run without the pool.
After each, a rerun must give the right values from an intact database without running
again any step recorded before the kill (see kill_trials.py; `benchmarks/soak.py` runs 200).
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

import kill_trials

TRIALS_PER_TARGET = 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="kills are Linux-checked")
def test_kill_trials(project: Path):
    rng = random.Random(1337)
    state = Path(tempfile.mkdtemp(prefix="bk"))
    outcomes = []
    try:
        for salt in range(TRIALS_PER_TARGET * len(kill_trials.TARGETS)):
            target = kill_trials.TARGETS[salt % len(kill_trials.TARGETS)]
            outcomes.append(kill_trials.trial(project, state, target, salt, rng))
    finally:
        kill_trials.stop_pools(project)
        shutil.rmtree(state, ignore_errors=True)
    failed = [o for o in outcomes if not o.ok]
    assert failed == []
    assert sum(o.killed for o in outcomes) >= len(outcomes) // 2  # most kills hit a live run
