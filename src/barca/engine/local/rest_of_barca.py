"""The rest of barca (the CLI, the server: what the commands a warm pool forks run), imported by
the pool once it has a moment and a core to spare, so that a forked `get` starts with its
imports done without this import, 0.2-0.5 s of CPU, taking a core from the workers of the run
that started the pool. Then what a library the pool preloaded does once per process on its
first use (`warm_up_libraries`), so that every worker forked later starts past it.

It waits for QUIET_SECONDS without a request (a first run's workers fork sooner), then imports
a slice of SLICE_SECONDS at a time (the pool answers requests in between; a command forked
before the end imports what it lacks) while the machine had at least half a core idle over the
last LOOK_SECONDS (/proc/stat; where that cannot be read, a core is always spare), or anyway
once BUSY_SECONDS passed that way: a machine kept busy for good (a server's long runs) must
not leave every command it forks to import the rest itself.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from typing import Iterator

QUIET_SECONDS = 0.5
SLICE_SECONDS = 0.02
LOOK_SECONDS = 0.1
SPARE_SHARE = 0.5  # idle cores over the last look that make a core to spare
BUSY_SECONDS = 30.0


class RestOfBarca:
    def __init__(self) -> None:
        self.left: Iterator[str] | None = None  # the modules not imported yet
        self.cores = os.cpu_count() or 1
        self.looked: tuple[float, int, int] | None = None  # (when, idle ticks, all ticks)

    def import_some(self, quiet_since: float) -> float | None:
        """Import a slice if the time has come; seconds until the next one, None once all
        are imported."""
        left = QUIET_SECONDS - (time.monotonic() - quiet_since)
        if left > 0:
            return left
        wait = self._until_spare()
        if wait and -left < BUSY_SECONDS:
            return wait
        if self.left is None:
            self.left = _barca_modules()
        deadline = time.monotonic() + SLICE_SECONDS
        for name in self.left:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - an optional part missing its library
                pass
            if time.monotonic() > deadline:
                return 0.0
        warm_up_libraries()
        return None

    def _until_spare(self) -> float:
        """0 when the last look found a core to spare, else when to look again."""
        ticks = _cpu_ticks()
        if ticks is None:
            return 0.0
        now = time.monotonic()
        if self.looked is None or now - self.looked[0] > 10 * LOOK_SECONDS:
            self.looked = (now, *ticks)  # a fresh span: what happened before is no guide
            return LOOK_SECONDS
        if now - self.looked[0] < LOOK_SECONDS:
            return LOOK_SECONDS - (now - self.looked[0])
        idle, total = ticks[0] - self.looked[1], ticks[1] - self.looked[2]
        self.looked = (now, *ticks)
        return 0.0 if total > 0 and idle * self.cores >= SPARE_SHARE * total else LOOK_SECONDS


def warm_up_libraries() -> None:
    """DuckDB's first database in a process sets up what all later ones share: about 10 ms that
    a tick's sensor step would pay in the new worker that opens the warehouse. An in-memory
    database opened and closed here does it and leaves nothing running (its scheduler's
    threads end with it): a fork copies no thread, so none may be left when the pool forks."""
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None:
        try:
            duckdb.connect(":memory:").close()
        except Exception:  # noqa: BLE001 - a broken install: its workers will say so
            pass


def _cpu_ticks() -> tuple[int, int] | None:
    """(idle, all) clock ticks of every CPU since boot; None where /proc/stat cannot say."""
    try:
        with open("/proc/stat", "rb") as fh:
            fields = fh.readline().split()
        ticks = [int(f) for f in fields[1:9]]
        return ticks[3] + ticks[4], sum(ticks)  # idle + iowait; user to steal
    except (OSError, ValueError, IndexError):
        return None


def _barca_modules() -> Iterator[str]:
    """All of barca but the telemetry backends, which import their tracing library (ddtrace
    hooks every later import and every fork: 20 ms more CPU a tick for every run, traced or
    not). A traced run imports its own."""
    import pkgutil

    import barca
    from barca.telemetry import INTEGRATIONS

    for info in pkgutil.walk_packages(barca.__path__, "barca."):
        if not info.name.endswith("__main__") and info.name not in INTEGRATIONS.values():
            yield info.name
