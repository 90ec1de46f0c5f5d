"""Byte checks: an asset recomputed at a run hash it already had (a refresh, a missing
artifact) should write the bytes it wrote before. When it does not, its result depends on
something its run hash cannot see (a clock, randomness, an undeclared input), so readers
cached on the old bytes may disagree with the new ones: the run says so. `deterministic=False`
declares that this is expected and turns the check off.

Only keys recomputed at an unchanged run hash are looked at, at most LIMIT per node and run,
one indexed query each, after the run's results are recorded.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from barca.graph import Graph
from barca.state import unpack_entry

RECOMPUTED = frozenset({"refresh", "refresh_all", "refresh_cascade", "artifact_missing"})
LIMIT = 1000


def changed_bytes(conn: sqlite3.Connection, graph: Graph, run: Any) -> dict[str, list[str]]:
    """Node id -> the keys (sorted) whose recompute wrote different bytes."""
    out: dict[str, list[str]] = {}
    for node_id, ran in run.results.items():
        d = graph.nodes[node_id]
        old = run.loaded.get(node_id)
        if d.kind != "asset" or not d.deterministic or old is None or not len(old):
            continue
        plan, checked, changed = run.plans[node_id], 0, []
        for key, entry in ran.items():
            i = unpack_entry(entry)[0]
            if plan.reasons[i].code not in RECOMPUTED:
                continue
            j = old.find(key)
            if j is None or old.run_hash[j] != plan.run_hashes[i]:
                continue
            checked += 1
            if checked > LIMIT:
                break
            from barca.store.history import output_hashes  # only when a key is checked

            digests = output_hashes(conn, node_id, plan.run_hashes[i], key)
            if len(digests) == 2 and None not in digests and digests[0] != digests[1]:
                changed.append(key)
        if changed:
            out[node_id] = sorted(changed)
    return out
