"""The digest of each key's bytes, for readers that depend on a node's output (sensors, cutoff
assets, key sources). Pure: this run's digests and the stored state come in; digests that are
on record nowhere in the state (`cutoff=True` just added, say) are named for the caller to look
up, and `with_found` fills them in.
"""

from __future__ import annotations

from typing import Mapping

from barca.packed_columns import HashColumn
from barca.planner.model import NodePlan
from barca.state import NodeState, unpack_entry

UNKNOWN_DIGEST = "0" * 32  # an output digest no bytes can have: readers treat it as changed


def output_digests(plan: NodePlan, state: NodeState, positions: Mapping[str, int],
                   ran: Mapping[str, str]) -> tuple[HashColumn | list, list[tuple[str, str]]]:
    """Each key's digest: this run's where it ran (`ran`, at `positions`: key -> ran_entry),
    else the stored one; and the (key, run hash) of keys with none. With the same keys as
    stored, only the keys that ran are touched."""
    if state.output_hash is not None and all(k in positions for k in ran) and \
            state.keys == plan.keys:
        return state.output_hash.replaced({unpack_entry(positions[k])[0]: digest
                                           for k, digest in ran.items()}), []
    if len(plan.keys) > 16:
        state.keys.indexed()
    digests = [ran[k] if k in ran else _stored(state, k) for k in plan.keys]
    if all(digests):
        return HashColumn(digests), []
    return digests, [(k, plan.run_hashes[i]) for i, k in enumerate(plan.keys) if not digests[i]]


def _stored(state: NodeState, key: str) -> str | None:
    i = state.find(key)
    return None if i is None else state.output_hash_at(i)


def with_found(plan: NodePlan, digests: list, found: Mapping[str, str]) -> HashColumn:
    """The digests with those looked up filled in; a key still without one gets a digest no
    bytes have, so its readers run."""
    return HashColumn(d or found.get(k) or UNKNOWN_DIGEST for d, k in zip(digests, plan.keys))
