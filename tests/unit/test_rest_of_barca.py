"""When a warm pool imports the rest of barca (engine.local.rest_of_barca): after half a second
without a request, while the machine has a core to spare, and anyway once it has been busy for
BUSY_SECONDS. The machine's idle time is given here instead of read from /proc/stat."""

from __future__ import annotations

import time

from barca.engine.local import rest_of_barca
from barca.engine.local.rest_of_barca import (BUSY_SECONDS, LOOK_SECONDS, QUIET_SECONDS,
                                              RestOfBarca)


def _machine(monkeypatch, idle_share: float) -> None:
    """Every look sees 100 more ticks, `idle_share` of them idle."""
    ticks = [0, 0]

    def cpu_ticks() -> tuple[int, int]:
        ticks[0] += int(100 * idle_share)
        ticks[1] += 100
        return ticks[0], ticks[1]

    monkeypatch.setattr(rest_of_barca, "_cpu_ticks", cpu_ticks)


def _looked_a_span_ago(rest: RestOfBarca) -> None:
    rest._until_spare()  # the first look starts a span
    when, idle, total = rest.looked  # type: ignore[misc]
    rest.looked = (when - 2 * LOOK_SECONDS, idle, total)


def test_nothing_is_imported_before_the_pool_has_been_quiet(monkeypatch):
    _machine(monkeypatch, idle_share=1.0)
    rest = RestOfBarca()
    wait = rest.import_some(time.monotonic())
    assert 0 < wait <= QUIET_SECONDS and rest.left is None


def test_a_busy_machine_is_waited_for(monkeypatch):
    _machine(monkeypatch, idle_share=0.1)  # on 2 cores or more: less than half a core idle
    monkeypatch.setattr(rest_of_barca.os, "cpu_count", lambda: 2)
    rest = RestOfBarca()
    _looked_a_span_ago(rest)
    assert rest.import_some(time.monotonic() - QUIET_SECONDS - 1) == LOOK_SECONDS
    assert rest.left is None


def test_a_spare_core_starts_the_import_and_so_does_a_long_busy_spell(monkeypatch):
    _machine(monkeypatch, idle_share=0.5)  # one core of two idle
    monkeypatch.setattr(rest_of_barca.os, "cpu_count", lambda: 2)
    spare = RestOfBarca()
    _looked_a_span_ago(spare)
    assert spare.import_some(time.monotonic() - QUIET_SECONDS - 1) in (0.0, None)
    assert spare.left is not None

    _machine(monkeypatch, idle_share=0.0)
    busy = RestOfBarca()
    _looked_a_span_ago(busy)
    assert busy.import_some(time.monotonic() - QUIET_SECONDS - BUSY_SECONDS - 1) in (0.0, None)
    assert busy.left is not None


def test_warming_duckdb_up_leaves_no_thread_and_a_forked_child_opens_a_database(tmp_path):
    """The pool forks after the warm-up: a thread left running would be missing in every child
    (DuckDB's scheduler would wait on it forever). Run in a fresh interpreter, so that no
    database of this test process is open."""
    import subprocess
    import sys

    script = """
import os, sys, duckdb
from barca.engine.local.rest_of_barca import warm_up_libraries
def threads(): return len(os.listdir("/proc/self/task"))
before = threads()
warm_up_libraries()
assert threads() == before, (before, threads())
pid = os.fork()
if pid == 0:
    value = duckdb.connect(sys.argv[1]).execute("select 42").fetchone()[0]
    os._exit(0 if value == 42 else 1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "w.duckdb")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
