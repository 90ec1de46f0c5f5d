"""The line `barca serve` writes to its log when a run ends, so that an operator reading the
log alone knows how each run went: on failure the step that failed, its key and the first line
of its error (else the run's own error); otherwise one line of counts."""

from __future__ import annotations

from barca.server.live_run import LiveRun


def ended_line(run: LiveRun) -> str:
    """`[barca] run <id> <status> — <what>: <how>` for a run that has ended."""
    head = f"[barca] run {run.run_id} {run.status} — {_what(run)}"
    if run.status == "complete":
        return head + _counts(run)
    if run.failed_steps:
        return head + ": " + _step_failure(run)
    error = _first_line((run.error or {}).get("error"))
    if error:
        return f"{head}: {error}"
    return head if run.status == "cancelled" else f"{head}: exit code {run.exit_code}"


def _what(run: LiveRun) -> str:
    request = run.request
    targets = ",".join(request.targets) or "all"
    by = f"schedule {request.schedule_id}" if request.schedule_id else run.triggered_by
    return f"{request.command} {targets}" + (" --dry-run" if request.dry_run else "") + \
        f" ({by})"


def _counts(run: LiveRun) -> str:
    summary = run.summary
    if not summary:
        return ""
    executed, total = summary["executed"], summary["total"]
    return (f": {executed} of {total} step{'s' * (total != 1)} ran, {total - executed} cached, "
            f"{summary['elapsed_seconds']:.1f}s")


def _step_failure(run: LiveRun) -> str:
    step = run.failed_steps[0]
    node, step_id = step["node_id"], step["step_id"]
    key = step_id[len(node) + 1:-1] if step_id.startswith(node + "[") else None
    error = _first_line(step.get("error")) or "no message"
    kind = step.get("error_type")
    if kind and not error.startswith(kind):
        error = f"{kind}: {error}"
    more = run.failed_count - 1
    return (f"step {node}" + (f", key {key}" if key else "") + f" failed: {error}"
            + (f" (and {more} more failed step{'s' * (more != 1)})" if more else ""))


def _first_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0][:300] if lines else ""
