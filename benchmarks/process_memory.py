"""Memory of running processes, read from /proc, for the benchmarks that report it (serve.py,
ui.py): a field of a process's status, its resident memory, and the peak resident memory of
some processes, sampled in a thread while the benchmark drives them.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path


def kib(path: str, field: str) -> float:
    """The number on the line of /proc file `path` that starts with `field` ("VmRSS:")."""
    for line in open(path):
        if line.startswith(field):
            return float(re.findall(r"\d+", line)[0])
    return 0.0


def rss_mb(pid: int) -> float:
    """The resident memory of `pid` in MB; 0 once it has ended."""
    try:
        return kib(f"/proc/{pid}/status", "VmRSS:") / 1024
    except OSError:
        return 0.0


class PeakRss:
    """The peak of the resident memory (MB) summed over some processes, with `descendants`
    over all their children too, sampled every `every` seconds from its start to `stop`."""

    def __init__(self, *pids: int, every: float, descendants: bool = False) -> None:
        self.pids, self.every, self.descendants = pids, every, descendants
        self.peak, self.done = self._now(), threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.wait(self.every):
            self.peak = max(self.peak, self._now())

    def _now(self) -> float:
        return sum(map(rss_mb, self._tree() if self.descendants else self.pids))

    def _tree(self) -> set[int]:
        seen, todo = set(), list(self.pids)
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            try:
                todo += map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())
            except OSError:
                pass  # it ended meanwhile
        return seen

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return self.peak
