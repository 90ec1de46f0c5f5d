"""A run's values as its report shows them: a target's value, every current key's of a
partitioned one, read only when asked for (200,000 keys' values take seconds), a summary of a
partitioned target's keys that opens no result, and where each result file is, relative to
the project."""

from __future__ import annotations

import heapq
import os
from pathlib import Path
from typing import Any, Iterator

from barca.engine.result import RunResult
from barca.planner.keys import labels_of
from barca.store.artifacts import read_result
from barca.store.packs import split_range


def has_value(result: RunResult, node_id: str | None) -> bool:
    """After failures: a partitioned target still gives its good keys; an unpartitioned one
    its value, if it neither failed nor was skipped."""
    if node_id is None:
        return False
    if result.plans[node_id].partitioned:
        return True
    return node_id not in result.skipped and all(o.node_id != node_id for o in result.failed)


def not_current(result: RunResult, node_id: str) -> set[str]:
    """Keys of the node that failed in this run or were skipped for a failed input: any file
    they have is an older result, not what a successful run would give."""
    out = set(result.skipped.get(node_id, ()))
    out.update(o.key for o in result.failed if o.node_id == node_id)
    return out


def keys_with_value(result: RunResult, node_id: str) -> int:
    """How many keys of a partitioned target have a current result, without looking for
    their files: its cached keys and the keys this run computed."""
    plan = result.plans[node_id]
    return len(plan.keys) - len(plan.run) + len(result.results.get(node_id, {}))


SUMMARY_PAST = 1_000  # keys of a partitioned target past which the default JSON summarises
LISTED_KEYS = 20  # key labels a summary lists


def summarised(result: RunResult, node_id: str) -> bool:
    """Whether the default JSON gives `node_id`'s keys as a summary: a partitioned target
    with more than SUMMARY_PAST current keys, unless `--partition` chose them."""
    plan = result.plans[node_id]
    return (plan.partitioned and not plan.unknown and not result.options.partition
            and keys_with_value(result, node_id) > SUMMARY_PAST)


def key_summary(result: RunResult, node_id: str) -> dict[str, Any]:
    """A partitioned target's keys as counts and the first labels, from the plan and this
    run's outcomes alone: no result is opened, however many keys there are."""
    plan = result.plans[node_id]
    ran = result.results.get(node_id, {})
    to_run = {plan.keys[i] for i in plan.run}
    first = [plan.label(k) for k in label_order(plan, LISTED_KEYS)
             if k in ran or k not in to_run][:LISTED_KEYS]
    return {"_barca_partitions": {
        "keys": keys_with_value(result, node_id),
        "computed": len(ran),
        "cached": len(plan.keys) - len(plan.run),
        "failed": sum(1 for o in result.failed if o.node_id == node_id and o.key),
        "blocked": len(result.skipped.get(node_id, ())),
        "first_keys": first,
        "computed_keys": [plan.label(k) for k in heapq.nsmallest(
            LISTED_KEYS, ran, key=None if len(plan.dims) == 1 else plan.label)],
        "truncated": True,
        "hint": "every key's value: -o value (with --json, inside this JSON); every result "
                "file: -o path; in Python: barca.get(); in SQL: barca sql"}}


def key_paths(result: RunResult, node_id: str | None, base: str | None = None) -> Any:
    """Where the target's results are: a path, or {key label: path} in label order for a
    partitioned target; under `base`, the artifacts directory as shown (default: relative to
    the project). Computed from the plan and the state: no file is looked up."""
    if node_id is None:
        return None
    if base is None:
        base = relative_path((result.artifacts_dir, ""), result)
    if not result.plans[node_id].partitioned:
        found = result.key_of(node_id, "")
        return None if found is None else f"{base}/{found[0]}"
    head = f"{base}/"
    return {label: head + found[0] for label, found in current_results(result, node_id)}


def final_output(result: RunResult, node_id: str | None, limit: int | None = None) -> Any:
    """The target's value; for a partitioned one every current key's (the first `limit`
    keys' when given)."""
    if node_id is None:
        return None
    if not result.plans[node_id].partitioned:
        found = result.key_of(node_id, "")
        return None if found is None else value_at(found[0], found[1], result)
    out = {}
    for label, found in current_results(result, node_id, limit):
        out[label] = value_at(found[0], found[1], result)
        if len(out) == limit:
            break
    return out


def current_results(result: RunResult, node_id: str, limit: int | None = None
                    ) -> Iterator[tuple[str, tuple[str, str]]]:
    """(label, (store key, format)) of each key of a partitioned target with a current
    result, in label order (`limit`: enough keys for that many), from the plan and the state
    alone. A key that failed in this run, or whose input failed, has none: any older result
    of it is not what a successful run would give."""
    plan = result.plans[node_id]
    if plan.unknown:
        return
    bad = not_current(result, node_id) if result.failed else ()
    order = label_order(plan, limit)
    if limit is None and len(order) > 16:  # every key: the state read whole
        located = result.keys_located(node_id)
        for key, label in zip(order, labels_of(plan.dims, order)):
            found = located.get(key)
            if found is not None and key not in bad:
                yield label, found
        return
    state = result.states.get(node_id)
    if state is not None and len(plan.keys) > 16:
        if plan.keys.ascending and state.keys == plan.keys:
            state.keys.ascending = True  # the same keys: each found by bisection
        else:
            state.keys.indexed()  # one dict, not a scan per key
    for key in order:
        found = None if key in bad else result.key_of(node_id, key)
        if found is not None:
            yield plan.label(key), found


def label_order(plan, limit: int | None) -> list[str]:
    """The keys in the order of their labels (`dim=value`); with one dimension that is the
    keys' own order, sorted without making 200,000 labels. With `limit`, enough keys for that
    many values (keys without a result are skipped: a few more are taken)."""
    if len(plan.dims) != 1:
        return sorted(plan.keys, key=plan.label)
    if limit is None:
        return sorted(plan.keys)
    wanted = limit + len(plan.run)
    if plan.keys.ascending:  # a dict source's: the first keys, without unpacking the others
        return [plan.keys[i] for i in range(min(wanted, len(plan.keys)))]
    return heapq.nsmallest(wanted, plan.keys)


def value_at(key: str, fmt: str, result: RunResult) -> Any:
    """A JSON result (store key `key`) as its value; any other as a pointer to its file (a
    packed one's range of its pack: `<pack>@<offset>:<length>`)."""
    if fmt in ("json", "keyed-json"):
        try:
            return read_result(result.store, key, fmt)
        except FileNotFoundError:
            pass
    file_key, _, length = split_range(key)
    path = f"{result.artifacts_dir}/{file_key}"
    size = length if length is not None else \
        os.stat(path).st_size if os.path.exists(path) else None
    shown = relative_path((Path(path), fmt), result) + key[len(file_key):]
    return {"_barca_artifact": {"path": shown, "format": fmt, "size_bytes": size}}


def relative_path(found: tuple[Path, str] | None, result: RunResult) -> str | None:
    """A result's path as displayed: relative to the project root."""
    if found is None:
        return None
    path = found[0]
    try:
        return str(path.relative_to(result.root))
    except ValueError:
        return str(path)
