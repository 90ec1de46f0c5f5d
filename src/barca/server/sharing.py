"""Which jobs due at the same instant share one run.

Sharing saves a common upstream from being computed by two runs at once, but it ties the jobs
together (one status, one worker pool), so it is done only where it costs no job anything:
jobs share when they have a step in common and the merged run holds nothing at a shallower
depth than a job that is not that job's own upstream. Side-by-side readers of one upstream
share, and so does a job with a scheduled reader of it; a job two levels below the common step
beside one a level below, or a job that also reads something the others do not, runs on its
own. Jobs with nothing in common never share.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Protocol, Sequence


class Shareable(Protocol):
    id: str
    cone: Mapping[str, int]  # every node the job runs or reads, with its depth in the graph


def depths(order: Sequence[str], upstream: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """Each node's depth: 0 for a node that reads nothing, else one more than its deepest
    input (`order` is topological)."""
    depth: dict[str, int] = {}
    for node in order:
        depth[node] = 1 + max((depth[u] for u in upstream[node]), default=-1)
    return depth


def share(jobs: Iterable[Shareable]
          ) -> tuple[list[list[Shareable]], dict[str, tuple[str, str]]]:
    """The jobs grouped into runs (in the order given), and for each job kept out of a group
    it has a step in common with, why: (a job of the merged run, the node it would wait for)."""
    groups: list[list[Shareable]] = []
    kept_out: dict[str, tuple[str, str]] = {}
    for job in jobs:
        for group in groups:
            if not any(job.cone.keys() & other.cone.keys() for other in group):
                continue
            blocker = _ahead([*group, job])
            if blocker is None:
                group.append(job)
                break
            kept_out.setdefault(job.id, blocker)
        else:
            groups.append([job])
    return groups, kept_out


def _ahead(group: Sequence[Shareable]) -> tuple[str, str] | None:
    """A job of the merged run and a node shallower than it that is not in its cone."""
    merged: dict[str, int] = {}
    for job in group:
        merged.update(job.cone)
    for job in group:
        own = job.cone[job.id]
        for node, depth in merged.items():
            if depth < own and node not in job.cone:
                return job.id, node
    return None
