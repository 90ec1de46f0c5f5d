"""`barca stats TARGET [FILES]`: how long a node takes, how often it fails or repeats work.

Every execution counts: one per run for an unpartitioned node, one per key and run for a
partitioned one. Timings are over successful executions; memory over all. Reads the pipeline
definitions (to resolve TARGET, without importing it) and the metadata database, and writes
nothing.
"""

from __future__ import annotations

from typing import Any, Sequence

import click

from barca.cli import render
from barca.cli.history import partition_key
from barca.cli.load import is_path_arg
from barca.cli.output import choose_listing_mode, emit, emit_json, parse_fields, pick_fields, table
from barca.cli.server_option import server_options
from barca.engine.driver import open_pipeline
from barca.errors import UsageError
from barca.printable import printable
from barca.store import history as store
from barca.store.db import connect
from barca.views.plan_text import human_size
from barca.views.times import utc_time

RECENT_FIELDS = ["run_id", "partition_key", "elapsed_seconds", "status", "created_at",
                 "error_message", "attempts", "cpu_seconds", "max_rss_bytes"]

HELP = """Runs, median / p95 / max time, failures and repeated work of one node.

\b
rerun_rate is the share of executions whose run hash had been executed before: work a
cache could have served (refreshes, reruns after a failure, tasks, which always run).
cache_hit_rate is null: cache hits execute nothing and are not recorded per node.
\b
Examples:
  barca stats summary pipeline.py
  barca stats scored pipeline.py --fields run_id,partition_key,elapsed_seconds
"""


@click.command("stats", help=HELP)
@server_options
@click.argument("target")
@click.argument("files", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output (default when stdout is "
              "not a terminal).")
@click.option("--pretty", is_flag=True, help="Human output (default in a terminal).")
@click.option("--fields", metavar="A,B", help="Keep only these keys of each recent run "
              "(implies JSON).")
@click.option("--env", "env_name", metavar="NAME", help="Read the history of environment NAME "
              "(or set BARCA_ENV).")
def stats_command(target, files, json_flag, pretty, fields, env_name) -> None:
    mode = choose_listing_mode(json_flag, pretty, fields)
    chosen = parse_fields(fields, RECENT_FIELDS)
    if is_path_arg(target):
        name = files[0] if files and not is_path_arg(files[0]) else "TARGET"
        raise UsageError(f"'{target}' is a file, but barca stats takes the target first",
                         f"barca stats {name} {target}")
    if "," in target:
        raise UsageError(f"barca stats takes one target, not '{target}'",
                         f"barca stats {target.split(',')[0]} {' '.join(files)}".rstrip())
    body = node_stats_json(target, files, env_name)
    body["recent_runs"] = pick_fields(body["recent_runs"], chosen)
    if mode == "json":
        emit_json(body, indent=True)
    else:
        emit(_report(body))


def node_stats_json(target: str, files: Sequence[str], env_name: str | None
                    ) -> dict[str, Any]:
    """`barca stats TARGET FILES --json`: the target's executions in environment `env_name`."""
    loaded = open_pipeline(list(files), env_name)
    node_id = loaded.graph.resolve_target(target)
    conn = connect(loaded.project.db_path, create=False)
    stats = store.node_stats(conn, node_id) if conn is not None else store.NodeStats(
        node_id, 0, 0, 0, (), (), ())
    return stats_json(stats, loaded.graph.nodes[node_id].kind)


def stats_json(stats: store.NodeStats, kind: str) -> dict[str, Any]:
    elapsed = stats.elapsed
    return {"id": stats.node_id, "kind": kind, "total_runs": stats.total_runs,
            "failures": stats.failures, "rerun_rate": stats.rerun_rate,
            "cache_hit_rate": None,
            "avg_elapsed_seconds": _r(sum(elapsed) / len(elapsed) if elapsed else None),
            "median_elapsed_seconds": _r(store.median(elapsed)),
            "p95_elapsed_seconds": _r(store.percentile(elapsed, 0.95)),
            "max_elapsed_seconds": _r(max(elapsed) if elapsed else None),
            "max_rss_bytes": max(stats.rss) if stats.rss else None,
            "median_max_rss_bytes": _int(store.median(stats.rss)),
            "recent_runs": [_recent(s) for s in stats.recent]}


def _recent(step: store.StepRow) -> dict[str, Any]:
    """An execution; `cpu_seconds` is the worker's CPU time over its attempts, null for
    executions recorded before barca kept it, a key of a batch call (the call's CPU is not
    split among its keys) and a step whose worker died."""
    return {"run_id": step.run_id, "partition_key": partition_key(step),
            "elapsed_seconds": _r(step.elapsed_seconds), "status": step.status,
            "created_at": utc_time(step.created_at),
            "error_message": step.error_message if step.status == "failed" else None,
            "attempts": step.attempts, "cpu_seconds": _r(step.cpu_seconds),
            "max_rss_bytes": step.max_rss_bytes}


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _report(body: dict[str, Any]) -> str:
    def secs(name: str) -> str:
        value = body[f"{name}_elapsed_seconds"]
        return "-" if value is None else f"{value:.3f}s"

    rate = body["rerun_rate"]
    failed = f" ({body['failures']} failed)" if body["failures"] else ""
    lines = [f"{body['kind'].capitalize()}: {body['id']}",
             f"Total materializations: {body['total_runs']}{failed}",
             f"Timing:  avg {secs('avg')}  median {secs('median')}  p95 {secs('p95')}  "
             f"max {secs('max')}",
             f"Peak memory:  median {human_size(body['median_max_rss_bytes'])}  "
             f"max {human_size(body['max_rss_bytes'])}",
             "Re-executed with unchanged inputs (rerun_rate): "
             + ("-" if rate is None else f"{rate * 100:.1f}%")]
    recent = body["recent_runs"]
    if not recent:
        return "\n".join(lines + ["", "No execution recorded yet."])
    return "\n".join(lines + ["", "Recent runs:", _recent_table(recent)])


def _recent_table(recent: list[dict[str, Any]]) -> str:
    headers = ["RUN_ID", "KEY", "ELAPSED", "STATUS", "ATTEMPTS", "CREATED"]
    rows = [[r.get("run_id", "-"), r.get("partition_key") or "-",
             render.human_seconds(r.get("elapsed_seconds")), r.get("status", "-"),
             str(r.get("attempts") or "-"), f"{r.get('created_at')} UTC"] for r in recent]
    text = table(headers, rows).splitlines()
    out = [text[0]]
    for line, item in zip(text[1:], recent):
        out.append(line)
        if item.get("error_message"):
            out.append(printable(f"  └─ {render.clip(item['error_message'], 100)}"))
    return "\n".join(out)
