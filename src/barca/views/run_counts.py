"""What became of each key of a run, counted: the summary line of a failed run.

The progress bar counts keys (cli-and-server §1.6), so the line printed under it must too;
a node count there ("2 failed" for one failed key of two nodes) reads as a contradiction
of the bar above it. Computed from the run's plans and outcomes alone: no store is read.
"""

from __future__ import annotations

from dataclasses import dataclass

from barca.engine.result import RunResult


@dataclass(frozen=True)
class KeyCounts:
    """Keys of the run's cone by outcome. `total` also holds the keys that got none (the run
    stopped before them), which is why the parts may sum to less."""

    total: int
    ran: int
    cached: int
    failed: int
    blocked: int
    unknown: int = 0  # nodes blocked before their keys were known (a sensor failed)

    @property
    def accounted(self) -> int:
        return self.ran + self.cached + self.failed + self.blocked

    def text(self) -> str:
        """`602 keys: 598 cached, 3 failed, 1 blocked`, or `600 of 602 keys: ...` when some
        keys got no outcome; parts that are zero are left out, except `failed`."""
        parts = [f"{n} {word}" for n, word in ((self.ran, "ran"), (self.cached, "cached"),
                                               (self.failed, "failed"),
                                               (self.blocked, "blocked"))
                 if n or word == "failed"]
        head = f"{self.total}" if self.accounted == self.total else \
            f"{self.accounted} of {self.total}"
        text = f"{head} {'key' if self.total == 1 else 'keys'}: {', '.join(parts)}"
        if self.unknown:
            text += f"; {self.unknown} blocked {'node' if self.unknown == 1 else 'nodes'} " \
                    "whose keys are unknown"
        return text


def key_counts(result: RunResult) -> KeyCounts:
    known = [(n, p) for n, p in result.plans.items() if n in result.cone and not p.unknown]
    failed = {(o.node_id, o.key) for o in result.failed}
    return KeyCounts(total=sum(len(p.keys) for _, p in known),
                     ran=sum(len(result.results.get(n, ())) for n, _ in known),
                     cached=sum(p.cached_count for _, p in known),
                     failed=len(failed),
                     blocked=sum(len(keys) for keys in result.skipped.values()),
                     unknown=sum(1 for n, p in result.plans.items()
                                 if n in result.cone and p.unknown and n in result.skipped))
