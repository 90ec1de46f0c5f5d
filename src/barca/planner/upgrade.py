"""Results recorded under hash scheme 1 stay cached after the upgrade to scheme 2.

Scheme 1 hashed code as text, scheme 2 as its syntax tree (discover.normal_form), so every
definition hash changed, and with it every context a key's result was recorded under. A key
whose stored context is the one scheme 1 gives the current code and inputs
(`context_digest(d.legacy_hash, parts)`) was recorded for this very code: the text is the
same, so the tree is too. Its context is rewritten to the current one, in the state, and
nothing else: its run hash (the name of its result file), signature and result stay, and
readers, which hash that run hash, see no change either. The caller stores the rewritten
state once (a run's snapshot), after which the key is a scheme 2 record like any other: a
formatter run from then on reruns nothing.

A key recorded under scheme 1 whose code has changed since (even by a comment: scheme 1 cannot
tell) is not recognised and runs, as it would have before the upgrade.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from barca.planner.hashes import context_digest
from barca.state import NodeState, StateBuilder


def legacy_context(legacy_hash: str, unkeyed: Mapping[str, str], state: NodeState,
                   context: str) -> str | None:
    """The scheme 1 context of the current code and inputs, when the state has keys recorded
    under it (and not already under the current one alone); None otherwise."""
    if not legacy_hash or not state.contexts or state.contexts == [context]:
        return None
    found = context_digest(legacy_hash, dict(unkeyed))
    return found if found in state.contexts else None


def upgraded(state: NodeState, legacy: str, context: str,
             parts: Mapping[str, str]) -> NodeState:
    """`state` with the keys recorded under scheme 1 context `legacy` moved to `context`
    (whose parts are `parts`); every per-key column is kept as it is. One entry of the
    context list changes, however many keys the node has; only when some keys are already
    under `context` (a state that was not stored after its upgrade) is it rebuilt key by key."""
    parts = {**state.parts, context: dict(parts)}
    if context not in state.contexts:
        return replace(state, contexts=[context if c == legacy else c for c in state.contexts],
                       parts=parts)
    builder = StateBuilder()
    for i in range(len(state)):
        key, run_hash, at, *rest = state.record(i)
        builder.put(key, run_hash, context if at == legacy else at, *rest)
    return builder.build(parts, state.failed)
