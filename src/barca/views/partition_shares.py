"""How a partitioned node's keys split into four shares that add up to its total: cached,
stale, failed, blocked (the bar and counts of the web UI, `shares` of a `barca status` entry's
`partitions`).

The counts of a status entry overlap: a key whose last attempt failed may still be served
from an earlier cached result (a failed key never deletes a good older one), and a blocked
key is also a missing key. So the shares are reconciled here, once, for every reader, from
the keys themselves: failed are the missing keys whose last attempt failed, blocked the other
missing keys that read a key that failed upstream, stale the rest of the missing keys (keys
that will run for any other reason, never-run keys included). `failed_still_cached` counts
the failed keys still served from a cached result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection


@dataclass(frozen=True)
class PartitionShares:
    cached: int
    stale: int
    failed: int
    blocked: int
    failed_still_cached: int

    def to_json(self) -> dict[str, Any]:
        """The fields a status entry's `partitions` gains: the four `shares` (adding up to its
        `total`) and `failed_still_cached`."""
        return {"shares": {"cached": self.cached, "stale": self.stale, "failed": self.failed,
                           "blocked": self.blocked},
                "failed_still_cached": self.failed_still_cached}


def partition_shares(cached: int, missing: Collection[str], failed: Collection[str],
                     blocked: Collection[str]) -> PartitionShares:
    """`cached` + the `missing` keys make the node's total; `failed`: keys whose last attempt
    failed (cached or not); `blocked`: missing keys that read a key that failed upstream."""
    missing = missing if isinstance(missing, (set, frozenset)) else set(missing)
    failed_missing = sum(1 for k in failed if k in missing)
    blocked_only = sum(1 for k in blocked if k not in failed)
    return PartitionShares(cached=cached, stale=len(missing) - failed_missing - blocked_only,
                           failed=failed_missing, blocked=blocked_only,
                           failed_still_cached=len(failed) - failed_missing)
