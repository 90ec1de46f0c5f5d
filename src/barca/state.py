"""Stored state as plain data, the form in which store/ hands it to plan/.

One `NodeState` per node, loaded in one read (a compacted snapshot plus the few rows
recorded after it), so that planning a node with 200,000 keys is a pass over dicts, never a
query per key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Field positions in a `done` record: key -> [run_hash, context, signature, format, output_hash]
RUN_HASH, CONTEXT, SIGNATURE, FORMAT, OUTPUT_HASH = range(5)


@dataclass(frozen=True, slots=True)
class NodeState:
    """The latest successful result per key, and the keys whose latest attempt failed.

    done:     key -> [run_hash, context digest, keyed signature, format, output_hash]
    failed:   key -> [run_hash, error message]   (only when the failure is newer than `done`)
    contexts: context digest -> {part label: digest}, to explain what changed
    Unpartitioned nodes use the key "". The planner never mutates these dicts.
    """

    done: dict[str, list[Any]] = field(default_factory=dict)
    failed: dict[str, list[Any]] = field(default_factory=dict)
    contexts: dict[str, dict[str, str]] = field(default_factory=dict)


EMPTY_STATE = NodeState()
