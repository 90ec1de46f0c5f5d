"""Failures grouped by their error, as the web UI shows them: an error that quotes its key
("no data for r7") is one problem written once ("no data for {key}"), not one per key.

Two sources: a partitioned node's failed keys, grouped by their error's first line in SQL
(`store.partition_pages`, at most GROUPS groups), merged here where a group of one key quotes
that key; and a run's failed steps (those kept with the run, or each as its event arrives),
grouped by `error_group`.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

GROUPS = 20  # groups of a node's failures the store sends: with as many, more may exist
SAMPLES = 5  # step ids kept with a run's failure group
MIN_QUOTED = 2  # a shorter key value ("7") is found inside too many errors to stand for it


def error_group(error: str | None, step_id: str | None) -> str:
    """A failed step's error as its group says it: its first line, with each value of the
    step's key (`orders[retailer=r7]`: `r7`) written `{key}`, longest first."""
    text = (error or "failed").split("\n")[0]
    step_id = step_id or ""
    start = step_id.find("[")
    if start < 0:
        return text
    values = [part[part.find("=") + 1:] for part in step_id[start + 1:-1].split(",")]
    for value in sorted((v for v in values if len(v) >= MIN_QUOTED), key=len, reverse=True):
        text = text.replace(value, "{key}")
    return text


def run_failure_groups(steps: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A run's failed steps (`step_id`, `node_id`, `error`) grouped by `error_group`, the most
    common first: each group's error, its first step's node, how many steps, SAMPLES of
    their ids."""
    groups: dict[str, dict[str, Any]] = {}
    for step in steps:
        if step["status"] != "failed":
            continue
        key = error_group(step["error"], step["step_id"])
        group = groups.setdefault(key, {"error": key, "node_id": step["node_id"], "count": 0,
                                        "sample_steps": []})
        group["count"] += 1
        if len(group["sample_steps"]) < SAMPLES:
            group["sample_steps"].append(step["step_id"])
    return sorted(groups.values(), key=lambda g: -g["count"])


def merged_key_failures(failures: Sequence[dict[str, Any]]) -> tuple[list[dict], int]:
    """A node's failure groups (first line of the error, its type, count, sample keys) with
    the groups of one key whose error quotes that key merged into one, the key written
    `{key}`; and how many failed keys the groups hold. `at_least`: the count is a lower bound
    (the store sent GROUPS groups, so more keys may share the error); `generic`: merged over
    keys that each named themselves, so there is no one error text to filter by."""
    merged: dict[tuple, dict[str, Any]] = {}
    grouped = 0
    more_may_exist = len(failures) >= GROUPS
    for failure in failures:
        grouped += failure["count"]
        error, generic = failure["error"] or "", False
        keys = failure["sample_keys"] or []
        only = keys[0] if failure["count"] == 1 and keys else None
        if only and len(only) >= MIN_QUOTED and only in error:
            error, generic = error.replace(only, "{key}"), True
        group = merged.get((failure["error_type"], error))
        if group is None:
            merged[(failure["error_type"], error)] = {
                "error": error, "error_type": failure["error_type"], "count": failure["count"],
                "sample_keys": list(keys), "at_least": False, "generic": generic}
            continue
        group["count"] += failure["count"]
        group["sample_keys"] += keys
        group["at_least"] = group["at_least"] or (generic and more_may_exist)
    for group in merged.values():
        if group["generic"] and group["count"] > 1 and more_may_exist:
            group["at_least"] = True
    return sorted(merged.values(), key=lambda g: -g["count"]), grouped
