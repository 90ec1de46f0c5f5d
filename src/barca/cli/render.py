"""What only a terminal shows: the dry-run table, sizes and durations for people, clipped
lines. The words and JSON fields of a plan are `barca.views.plan_text`'s."""

from __future__ import annotations

from typing import Mapping

from barca.planner.batching import BatchPlan
from barca.planner.model import NodePlan
from barca.views.plan_text import WHY_WIDTH, first_line, summary_counts, why


def dry_run_table(command: str, target: str | None, plans: list[NodePlan],
                  batches: Mapping[str, BatchPlan]) -> str:
    from barca.cli.output import table

    label = {"run": "will run", "partial": "partial", "cached": "cached", "unknown": "unknown",
             "skipped": "skipped"}
    rows = [[label[p.action], why(p, batches.get(p.node_id), WHY_WIDTH), p.node_id]
            for p in plans]
    header = f"Dry run: barca {command} {target or ''}".rstrip()
    return f"{header} (nothing executed, nothing written)\n\n" + table(
        ["STATUS", "WHY", "STEP"], rows) + "\n\n" + summary_line(plans)


def summary_line(plans: list[NodePlan]) -> str:
    c = summary_counts(plans)
    return f"{c['will_run']} will run, {c['cached']} cached, {c['unknown']} unknown"


def human_seconds(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f}s"




def clip(text: str | None, width: int) -> str:
    """One line of at most `width` characters, ending in `…` when cut."""
    line = first_line(text)
    return line if len(line) <= width else line[: width - 1] + "…"
