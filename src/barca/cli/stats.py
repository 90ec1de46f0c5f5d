"""`barca stats TARGET [FILES]`: how long a node takes, how often it fails or repeats work.

Every execution counts: one per run for an unpartitioned node, one per key and run for a
partitioned one. Timings are over successful executions; memory over all. Reads the pipeline
definitions (to resolve TARGET, without importing it) and the metadata database, and writes
nothing.
"""

from __future__ import annotations

from typing import Any

import click

from barca.cli import render
from barca.discover.files import is_path_arg
from barca.cli.output import choose_listing_mode, emit, emit_json, parse_fields, table
from barca.views.listing import pick_fields
from barca.cli.server_option import server_options
from barca.errors import UsageError
from barca.printable import printable
from barca.views.plan_text import human_size
from barca.views.stats import RECENT_FIELDS, node_stats_json
from barca.views.times import utc_time_of


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
             str(r.get("attempts") or "-"), f"{utc_time_of(r.get('created_at'))} UTC"]
            for r in recent]
    text = table(headers, rows).splitlines()
    out = [text[0]]
    for line, item in zip(text[1:], recent):
        out.append(line)
        if item.get("error_message"):
            out.append(printable(f"  └─ {render.clip(item['error_message'], 100)}"))
    return "\n".join(out)
