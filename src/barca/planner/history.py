"""Going back to an older result: a key whose new run hash equals that of an older success of
the same key (an edit undone, an input back at an earlier value) is served from that result
instead of running again. Pure: the older successes come in as records, looked up by the
caller for exactly the (key, run hash) pairs `history_wanted` names.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from barca.planner.model import NodePlan
from barca.state import NodeState

_MAY_MATCH_HISTORY = ("changed", "never_run", "new_key")  # not refresh, failed, sensor, task


def history_wanted(plan: NodePlan) -> list[tuple[str, str]]:
    """(key, run hash) of the keys that would run but may have succeeded before at that hash."""
    if plan.kind != "asset" or plan.unknown:
        return []
    return [(plan.keys[i], plan.run_hashes[i]) for i in plan.run
            if plan.reasons[i].code in _MAY_MATCH_HISTORY]


def apply_history(plan: NodePlan, state: NodeState, hits: Sequence[tuple]
                  ) -> tuple[NodePlan, NodeState]:
    """The plan without the keys `hits` serve, and the state that points at those results.
    hits: records of older successes, as `NodeState.record` gives them."""
    if not hits:
        return plan, state
    hit_keys = {record[0] for record in hits}
    run = tuple(i for i in plan.run if plan.keys[i] not in hit_keys)
    return (replace(plan, run=run, reasons={i: plan.reasons[i] for i in run}),
            state.with_records(hits))
