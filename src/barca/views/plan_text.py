"""Every sentence barca shows about a plan: reasons, step rows, summaries.

The planner returns reason codes with their evidence; this module is the only place that turns
them into words (the WHY column, `detail`) and into the JSON step objects that the CLI prints,
the Python API returns and the server sends.
"""

from __future__ import annotations

from typing import Any, Mapping

from barca.planner.batching import BatchPlan, describe
from barca.planner.model import NodePlan, Reason

KEYS_LISTED = 20

_REASON_FIELD = {"never_run": "not_materialized", "new_key": "not_materialized",
                 "changed": "not_materialized", "failed": "not_materialized"}

_UNKNOWN_TEXT = {
    "partitions_unknown": "partition keys come from the output of '{x}', which is not "
                          "available until it runs",
    "cutoff_pending": "reads '{x}' (cutoff=True), which would run first: this step runs only "
                      "if it writes different bytes",
    "sensor_output_unknown": "sensor '{x}' has no recorded output yet",
    "upstream_unknown": "depends on '{x}', which cannot be decided yet",
    "partition_selection": "--partition leaves out keys of '{x}' that this node reads; run "
                           "without --partition to update it",
}


def reason_field(reason: Reason) -> str:
    return _REASON_FIELD.get(reason.code, reason.code)


def reason_text(reason: Reason) -> str:
    code = reason.code
    if code == "sensor":
        return "sensors always re-run"
    if code == "task":
        return "tasks always re-run"
    if code == "never_run":
        return "no cached result for this code and these inputs"
    if code == "new_key":  # a key added since, or one a cancelled or failed run never reached
        return "never computed"
    if code == "changed":
        return changed_text(reason.changed)
    if code == "failed":
        return f"last run failed: {first_line(reason.origin)}"
    if code == "refresh":
        return "refresh requested"
    if code == "refresh_cascade":
        return f"refresh of '{reason.origin}' cascades here"
    if code == "refresh_all":
        return "--refresh-all"
    if code == "artifact_missing":
        return "its cached result file is missing"
    return code


def changed_text(changed: tuple[str, ...]) -> str:
    if not changed:
        return "changed"
    more = f" (+{len(changed) - 1} more)" if len(changed) > 1 else ""
    return f"changed: {changed[0]}{more}"


def key_cause(reason: Reason) -> str:
    """The cause in parentheses after a key in a WHY column."""
    if reason.code == "changed" and reason.changed:
        return f"{reason.changed[0]} changed"
    if reason.code == "changed":
        return "changed"
    return reason_text(reason)


def first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def first_run_keys(plan: NodePlan, n: int = KEYS_LISTED) -> list[int]:
    """Positions of the first `n` keys that will run, in declared key order (the order they
    run and are batched in: a list's, a keyed source's dict order, dimension names first)."""
    return list(plan.run[:n])


def will_run_keys(plan: NodePlan) -> list[str]:
    return [plan.label(plan.keys[i]) for i in first_run_keys(plan)]


WHY_WIDTH = 250  # a table's WHY longer than this lists fewer keys and counts the rest
KEYS_WIDTH = 60  # the keys listed then, their shared cause said once after the count


def why(plan: NodePlan, batch: BatchPlan | None = None, width: int | None = None) -> str:
    """The WHY column for one node of a dry run or status; a batched node's calls after it.
    With `width`, the keys listed stop near it and the rest are counted (`and 57 more`)."""
    text = _why(plan, width)
    return f"{text}; {calls_summary(batch)}" if batch is not None and plan.run else text


def calls_summary(batch: BatchPlan) -> str:
    """A batched node's "3 keys in 1 call (batch=all)"; without the calls when the dry run did
    not group them (batches/batches_by over more keys than it lists)."""
    where = "" if batch.calls is None else f" in {plural(batch.calls, 'call')}"
    return f"{plural(batch.keys, 'key')}{where} ({describe(batch.setting)})"


def _why(plan: NodePlan, width: int | None = None) -> str:
    if plan.unknown:
        return _UNKNOWN_TEXT[plan.unknown].format(x=plan.unknown_detail)
    if plan.pinned and not plan.run:
        return pinned_text(plan)
    if not plan.partitioned:
        return reason_text(plan.reasons[0]) if plan.run else "cached"
    total = len(plan.keys)
    if not plan.run:
        return f"{plural(total, 'key')} cached"
    if plan.kind in ("sensor", "task") or len(plan.run) == total and _same_reason(plan):
        return f"{plural(total, 'key')}; {reason_text(plan.reasons[plan.run[0]])}"
    listed = first_run_keys(plan)
    head = f"{plan.cached_count} of {total} keys cached; will run: "
    items = ", ".join(f"{plan.label(plan.keys[i])} ({key_cause(plan.reasons[i])})"
                      for i in listed)
    more = f", +{len(plan.run) - len(listed)} more" if len(plan.run) > len(listed) else ""
    full = head + items + more
    if width is None or len(full) <= width:
        return full
    return head + _fitted_keys(plan, listed, width - len(head))


def _fitted_keys(plan: NodePlan, listed: list[int], width: int) -> str:
    """`k=r1, k=r2, k=r3 and 57 more (cause)`: one cause shared by the listed keys is said
    once, at the end, after KEYS_WIDTH characters of keys; mixed causes follow their keys
    within `width`, a cause said again only when it changes. Keys left out are counted."""
    causes = [key_cause(plan.reasons[i]) for i in listed]
    if len(set(causes)) == 1:
        return _fitted_keys_same(plan, listed, KEYS_WIDTH) + f" ({causes[0]})"
    items: list[str] = []
    used, last_cause = 0, None
    for n, i in enumerate(listed):
        cause = causes[n]
        item = plan.label(plan.keys[i]) + (f" ({cause})" if cause != last_cause else "")
        rest = len(plan.run) - n
        if items and used + len(item) + 2 + len(f" and {rest} more") > width:
            return ", ".join(items) + f" and {rest} more"
        items.append(item)
        used += len(item) + 2
        last_cause = cause
    more = len(plan.run) - len(listed)
    return ", ".join(items) + (f" and {more} more" if more else "")


def _fitted_keys_same(plan: NodePlan, listed: list[int], width: int) -> str:
    labels = [plan.label(plan.keys[i]) for i in listed]
    for n in range(len(labels), 0, -1):
        rest = len(plan.run) - n
        text = ", ".join(labels[:n]) + (f" and {rest} more" if rest else "")
        if len(text) <= width or n == 1:
            return text
    return ""


def pinned_fields(plan: NodePlan, step: dict[str, Any]) -> None:
    """A stale Manual asset kept as it is: reason `manual`, and what changed."""
    if plan.pinned:
        step["reason"] = "manual"
        first = plan.reasons_pinned_first()
        if first.changed:
            step["changed"] = list(first.changed)


def pinned_text(plan: NodePlan) -> str:
    """Why a stale Manual asset did not run: its result is kept until it is refreshed."""
    first = plan.reasons_pinned_first()
    keys = f"{plural(len(plan.pinned), 'key')} " if plan.partitioned else ""
    name = plan.node_id.rsplit(":", 1)[-1]
    return (f"{keys}kept (freshness=Manual) though {reason_text(first)}; recompute with "
            f"--refresh {name}")


def served_text(served: dict[str, int], partitioned: bool) -> str:
    """Keys another run computed while this one waited for them: `served` is run id -> keys."""
    runs = f"{'run' if len(served) == 1 else 'runs'} {', '.join(sorted(served))}"
    if not partitioned:
        return f"computed by concurrent {runs} while this run waited; served from cache"
    return f"{plural(sum(served.values()), 'key')} computed by concurrent {runs}"


def plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _same_reason(plan: NodePlan) -> bool:
    first = plan.reasons[plan.run[0]]
    return all(plan.reasons[i] == first for i in plan.run[:200])


def human_size(size: int | None) -> str:
    if size is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"


def partitions_json(plan: NodePlan) -> dict[str, Any]:
    out: dict[str, Any] = {"total": len(plan.keys), "cached": plan.cached_count,
                           "will_run": len(plan.run), "will_run_keys": will_run_keys(plan)}
    changed = {plan.label(plan.keys[i]): list(plan.reasons[i].changed)
               for i in first_run_keys(plan) if plan.reasons[i].changed}
    if changed:
        out["changed"] = changed
    return out


def dry_run_step(plan: NodePlan, artifact: str | None,
                 batch: BatchPlan | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"id": plan.node_id, "kind": plan.kind, "action": plan.action}
    if plan.unknown:
        step["reason"] = plan.unknown
        step["detail"] = why(plan)
        return step
    if plan.run:
        first = plan.reasons[plan.run[0]]
        step["reason"] = reason_field(first)
        if first.changed:
            step["changed"] = list(first.changed)
    else:
        pinned_fields(plan, step)
    step["detail"] = why(plan, batch)
    if not plan.partitioned:
        step["run_hash"] = plan.run_hashes[0]
        if not plan.run and artifact:
            step["artifact"] = artifact
    else:
        step["partitions"] = partitions_json(plan)
    if batch is not None:
        step["batch"] = batch.as_json()
    return step



def summary_counts(plans: list[NodePlan]) -> dict[str, int]:
    will_run = sum(len(p.run) for p in plans if not p.unknown)
    cached = sum(p.cached_count for p in plans if not p.unknown)
    unknown = sum(1 for p in plans if p.unknown and p.unknown != "partition_selection")
    return {"will_run": will_run, "cached": cached, "unknown": unknown}



_SECRET_WORDS = ("TOKEN", "SECRET", "KEY", "PASSWORD")


def env_value(name: str, value: str | None) -> str | None:
    """A declared env= variable's value as shown: `<redacted>` for a name that says it is a
    secret (`API_TOKEN`, `db_password`, `KEY`), None when unset."""
    upper = name.upper()
    if value is not None and any(upper == w or upper.endswith(f"_{w}") for w in _SECRET_WORDS):
        return "<redacted>"
    return value


def env_json(names: tuple[str, ...], values: Mapping[str, str | None]) -> dict[str, str | None]:
    """`steps[].env`: each declared variable's value as the run hash saw it."""
    return {name: env_value(name, values.get(name)) for name in names}


def env_suffix(shown: Mapping[str, str | None]) -> str:
    """` env A=1 B=<unset> C="two words"`, the tail of a node's `--agent` step lines."""
    parts = []
    for name, value in shown.items():
        text = "<unset>" if value is None else value
        if value is not None and (not value or any(c.isspace() for c in value)):
            text = '"' + value.replace('"', '\\"') + '"'
        parts.append(f"{name}={text}")
    return " env " + " ".join(parts) if parts else ""



