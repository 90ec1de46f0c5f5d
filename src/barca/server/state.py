"""`/state`: every node's `barca status` entry, with its recent durations and next run.

Status is computed by the same view as `barca status` (`barca.views.status`) in a child
process (it plans against the current sources and the database, as the CLI would), at most
one at a time, and kept until the database or a source file changes.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import orjson

from barca.server.commands import served_status
from barca.views.node_pages import recorded_stamp


class StateCache:
    def __init__(self, root: Path, files: Sequence[str], env: str | None,
                 read: Callable, left_out: Sequence[str] = ()) -> None:
        self.root, self.files, self.env, self.read = root, files, env, read
        self.left_out = left_out  # nodes the server's load left out (their expressions fail)
        self.lock = threading.Lock()
        self.stamp: Any = None
        self.nodes: list[dict] = []

    def nodes_now(self) -> list[dict]:
        """The status entries, recomputed if anything changed since the last ones (blocks)."""
        with self.lock:
            stamp = (self.read(recorded_stamp), tuple(_mtime(self.root / f) for f in self.files),
                     tuple(self.left_out))
            if stamp != self.stamp:
                self.nodes = self._status()
                self.stamp = stamp
            return self.nodes

    def _status(self) -> list[dict]:
        return orjson.loads(served_status(self.root, self.files, self.env,
                                          self.left_out))["nodes"]


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0
