"""How a partitioned node's keys split into four shares that add up to its total: cached,
stale, failed, blocked (the bar and counts of the web UI, `shares` of a `barca status` entry's
`partitions`).

The counts of a status entry overlap: a key whose last attempt failed may still be served
from an earlier cached result (a failed key never deletes a good older one), and a blocked
key is also a missing key. So the shares are reconciled here, once, for every reader: the
failed share is taken from the missing keys first, the blocked share from what is left of
them, and stale is the rest (keys that will run for any other reason, never-run keys
included). `failed_still_cached` is how many failed keys are still served from a cached result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


def partition_shares(cached: int, missing: int, failed: int, blocked: int) -> PartitionShares:
    """`cached` + `missing` keys make the node's total; `failed`: keys whose last attempt failed
    (cached or not); `blocked`: missing keys that read a key that failed upstream."""
    failed_share = min(failed, missing)
    blocked_share = min(blocked, missing - failed_share)
    return PartitionShares(cached=cached, stale=max(0, missing - failed_share - blocked_share),
                           failed=failed_share, blocked=blocked_share,
                           failed_still_cached=failed - failed_share)
