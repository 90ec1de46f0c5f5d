"""A spare's prepared memory (engine.local.warm_heap): how much, and that it stays touched.

Preparing runs in a forked child here, as in a spare: the child reports how much its resident
memory grew and how many pages a burst of new small objects then took afresh.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from barca.engine.local import warm_heap
from barca.engine.local.warm_heap import LEAST, MB, PAGE, HeapBudget


def test_the_budget_is_half_of_what_recent_children_took_beyond_their_preparing():
    budget = HeapBudget(most=64 * MB)
    assert budget.size() == 0  # nothing learnt yet
    budget.learn(faults=(3 * MB) // PAGE, prepared=0)
    assert budget.size() == 0  # 1.5 MB: under LEAST, not worth a spare's time
    budget.learn(faults=(40 * MB) // PAGE, prepared=0)
    assert budget.size() == 20 * MB
    budget.learn(faults=(60 * MB) // PAGE, prepared=20 * MB)  # its own preparing not counted
    assert budget.size() == 20 * MB
    budget.learn(faults=(400 * MB) // PAGE, prepared=0)
    assert budget.size() == 64 * MB  # the bound
    budget.most = 0
    assert budget.size() == 0  # BARCA_SPARE_HEAP_MB=0
    assert LEAST > 0


def test_the_oldest_children_are_forgotten():
    budget = HeapBudget(most=64 * MB)
    budget.learn(faults=(100 * MB) // PAGE, prepared=0)
    for _ in range(warm_heap.RECENT):
        budget.learn(faults=(10 * MB) // PAGE, prepared=0)
    assert budget.size() == 5 * MB


CHILD = """
import json, os, resource, sys
from barca.engine.local import warm_heap

def resident():
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * warm_heap.PAGE

size, stop_after = int(sys.argv[1]), int(sys.argv[2])
calls = []

def asked():
    calls.append(1)
    return 0 < stop_after <= len(calls)

pid = os.fork()  # as a spare is: a child of a process that has settled
if pid == 0:
    before = resident()
    warm_heap.prepare(size, asked)
    grown = resident() - before
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    burst = [(str(i), i) for i in range(100_000)]  # about 15 MB of new small objects
    taken = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    faults += taken
    large = [b"x" * (2 * warm_heap.MB) for _ in range(3)]  # malloc's, each written whole
    large_taken = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    print(json.dumps({"grown": grown, "asked": len(calls), "burst_faults": taken,
                      "large_faults": large_taken, "pinned": len(warm_heap._pinned),
                      "kept": len(burst) + len(large)}), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


def _in_child(size: int, stop_after: int = 0) -> dict:
    """Prepare `size` bytes in a child forked by a fresh interpreter (asked to stop after
    `stop_after` MB, 0: never): what it saw. Not this test process's child: its heap, with
    the free blocks the tests before left, is not a settled pool's."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(size), str(stop_after)],
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_prepared_arenas_stay_touched_and_the_next_objects_take_no_new_pages():
    bare = _in_child(0)
    ready = _in_child(32 * MB)
    assert ready["grown"] >= 28 * MB  # touched, and kept by two objects an arena
    assert ready["asked"] == 32  # after each MB, of the arenas and of the C heap
    assert bare["burst_faults"] > 2000  # ~15 MB of objects: pages taken afresh...
    assert ready["burst_faults"] < bare["burst_faults"] // 4  # ...but not once prepared
    if warm_heap._glibc() is not None:  # a quarter of it, 8 MB, is glibc's heap
        assert ready["pinned"] >= 2 * 22
        assert bare["large_faults"] >= 3 * 2 * MB // PAGE  # 6 MB of malloc's blocks...
        assert ready["large_faults"] < bare["large_faults"] // 4  # ...ready once prepared


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_preparing_stops_as_soon_as_a_request_comes():
    stopped = _in_child(64 * MB, stop_after=2)
    assert stopped["asked"] == 2
    assert stopped["grown"] < 8 * MB
