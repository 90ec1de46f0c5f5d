"""`barca gc`: parse the size limit, say which files a plan of the current pipeline would
serve from cache (an older result the current code hashes to again), and report what
`store.gc` removed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from barca import config
from barca.views.plan_text import human_size
from barca.cli.output import choose_mode, emit, emit_json
from barca.printable import note
from barca.store.packs import file_of
from barca.errors import BarcaError, UsageError
from barca.project import open_project
from barca.store.gc import collect

HELP = """Remove stored results that no current state needs, oldest first.

\b
Never removes the latest result of any node and key, nor one the current code would be served
from cache. With --max-size, removes only until the artifacts fit in SIZE (e.g. 500MB, 2GiB).
\b
Examples:
  barca gc --dry-run
  barca gc
  barca gc --max-size 2GB --env staging
"""


@click.command("gc", help=HELP)
@click.option("--dry-run", is_flag=True, help="List what would be removed; remove nothing.")
@click.option("--max-size", metavar="SIZE", help="Remove only until the artifacts take at "
              "most SIZE (bytes, or KB/MB/GB/TB, KiB/MiB/GiB/TiB).")
@click.option("--json", "json_flag", is_flag=True, help="JSON output (default when stdout is "
              "not a terminal).")
@click.option("--pretty", is_flag=True, help="Human output (default in a terminal).")
@click.option("--env", "env_name", metavar="NAME", help="Collect in environment NAME (or set "
              "BARCA_ENV).")
def gc_command(dry_run, max_size, json_flag, pretty, env_name) -> None:
    mode = choose_mode(json_flag, pretty)
    limit = parse_size(max_size) if max_size is not None else None
    project = open_project(env_name)
    body, warnings = collect(project, lambda: _planned(env_name), limit, dry_run)
    for warning in warnings:
        note(warning)
    if mode == "json":
        emit_json(body, indent=True)
    else:
        emit(_report(body))


def parse_size(text: str) -> int:
    """`500MB` -> 500000000, `2GiB` -> 2147483648, `1024` -> 1024 (as `[cache] max_size`)."""
    size = config.parse_size(text)
    if size is None:
        raise UsageError(f"--max-size {text!r} is not a size",
                         "write a size such as 500MB, 2GiB or 1000000 (bytes)")
    return size


def _planned(env_name: str | None) -> set[Path]:
    """Files the current pipeline would be served from (what `barca status` calls cached)."""
    from barca.engine.driver import run

    try:
        result = run("get", None, [], dry_run=True, env=env_name, observe_sensors=False)
    except BarcaError as exc:
        note(f"barca: could not plan the pipeline ({exc.message}); keeping only the latest "
             "result of every node and key")
        return set()
    files = set()  # store keys: a packed result's is its pack's (store.packs)
    for node_id in result.order:
        plan = result.plans[node_id]
        if plan.unknown:
            continue
        ran = {plan.keys[i] for i in plan.run}
        for key in plan.keys:
            found = None if key in ran else result.key_of(node_id, key)
            if found:
                files.add(file_of(found[0]))
    artifacts = result.artifacts_dir.resolve()
    return {artifacts / key for key in files}


def _report(body: dict[str, Any]) -> str:
    size = human_size

    def files(n: int, what: str) -> str:
        return f"{n} {what}{'s' if n != 1 else ''}"

    removed = f"{files(body['evicted_files'], 'file')} ({size(body['evicted_bytes'])})"
    kept = f"kept {files(body['kept_files'], 'current result')} ({size(body['kept_bytes'])})"
    if body["dry_run"]:
        lines = [f"Would remove {removed}, oldest first; {kept}."]
        lines += [f"  {c['path']} ({size(c['bytes'])}, {c['reason']})" for c in body["evicted"]]
    else:
        lines = [f"Removed {removed}; {kept}."]
    if body["limit_bytes"] is not None and body["after_bytes"] > body["limit_bytes"]:
        lines.append(f"Still {size(body['after_bytes'])}, over --max-size "
                     f"{size(body['limit_bytes'])}: the rest are current results, never removed.")
    return "\n".join(lines)
