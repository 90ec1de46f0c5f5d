"""`barca gc`: parse the size limit, say which files a plan of the current pipeline would
serve from cache (an older result the current code hashes to again), and report what
`store.gc` removed. `--remote`: what `store.remote_gc` finds, or deletes, in the shared
store."""

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
from barca.store import remote_gc

HELP = """Remove stored results that no current state needs, oldest first.

\b
Never removes the latest result of any node and key, nor one the current code would be served
from cache. With --max-size, removes only until the artifacts fit in SIZE (e.g. 500MB, 2GiB).
\b
Examples:
  barca gc --dry-run
  barca gc
  barca gc --max-size 2GB --env staging
\b
--remote works on the shared store of [remote] instead (barca docs remote): --dry-run lists
the objects no machine can use any more (in no index, or superseded) that are older than
--grace (7d), and keeps that list; a later `barca gc --remote` deletes what it lists and is
still garbage. Nothing remote is deleted otherwise.
  barca gc --remote --dry-run
  barca gc --remote
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
@click.option("--remote", is_flag=True, help="Collect the shared store of [remote] (after a "
              "--dry-run), not this machine's artifacts.")
@click.option("--grace", metavar="DURATION", help="With --remote --dry-run: keep every object "
              "younger than this (default 7d; 12h, 30m, seconds).")
def gc_command(dry_run, max_size, json_flag, pretty, env_name, remote, grace) -> None:
    mode = choose_mode(json_flag, pretty)
    if remote or grace is not None:
        return _remote(mode, dry_run, max_size, env_name, remote, grace)
    limit = parse_size(max_size) if max_size is not None else None
    project = open_project(env_name)
    body, warnings = collect(project, lambda: _planned(env_name), limit, dry_run)
    for warning in warnings:
        note(warning)
    if mode == "json":
        emit_json(body, indent=True)
    else:
        emit(_report(body))


def _remote(mode: str, dry_run: bool, max_size: str | None, env_name: str | None,
            remote: bool, grace: str | None) -> None:
    from barca.store.artifact_store import project_store
    from barca.store.remote_config import remote_of

    if not remote:
        raise UsageError("--grace is for the shared store", "barca gc --remote --dry-run "
                         f"--grace {grace}")
    if max_size is not None:
        raise UsageError("--max-size trims this machine's artifacts, not the shared store",
                         "run `barca gc --max-size SIZE` and `barca gc --remote` separately")
    if grace is not None and not dry_run:
        raise UsageError("--grace is the dry run's: the deletion keeps to what it listed",
                         f"barca gc --remote --dry-run --grace {grace}, then barca gc --remote")
    project = open_project(env_name)
    if remote_of(project.settings) is None:
        raise UsageError("barca gc --remote collects the shared store, and this project has "
                         "none", 'set [remote] uri = "s3://bucket/prefix" in barca.toml (or '
                         "BARCA_REMOTE_URI; barca docs remote), or run `barca gc` for this "
                         "machine's artifacts")
    store = project_store(project)  # exit 3 when it does not answer
    where = f"{store.remote.uri}/{store.env}"
    if dry_run:
        found = remote_gc.survey(store, remote_gc.grace_seconds(grace or "7d"))
        remote_gc.save_plan(project.state_dir, found)
        body = {"dry_run": True, **found}
    else:
        plan = remote_gc.load_plan(project.state_dir, where)
        found = remote_gc.survey(store, plan["grace_seconds"])
        done = remote_gc.delete(store, project.state_dir, plan, found)
        body = {"dry_run": False, **{k: found[k] for k in (
            "store", "grace_seconds", "objects", "bytes", "young_objects")}, **done}
        for failure in done["failed"]:
            note(f"[barca] warning: cannot delete {failure['path']}: {failure['error']}")
    if mode == "json":
        emit_json(body, indent=True)
    else:
        emit(_remote_report(body))


def _remote_report(body: dict[str, Any]) -> str:
    size = human_size

    def objects(n: int) -> str:
        return f"{n} object{'s' if n != 1 else ''}"

    grace = _duration(body["grace_seconds"])
    n = body["young_objects"]
    young = f"{objects(n)} more {'is' if n == 1 else 'are'} garbage but younger than {grace}, kept"
    if body["dry_run"]:
        why = ", ".join(f"{t['objects']} {r}" for r, t in sorted(body["by_reason"].items()))
        lines = [f"Would delete {objects(body['garbage_objects'])} "
                 f"({size(body['garbage_bytes'])}{': ' + why if why else ''}) of "
                 f"{objects(body['objects'])} ({size(body['bytes'])}) in {body['store']}; "
                 f"{young}."]
        lines += [f"  {g['path']} ({size(g['bytes'])}, {g['reason']}, "
                  f"{_duration(g['age_seconds'])} old)" for g in body["garbage"]]
        if body["garbage"]:
            lines.append("Run `barca gc --remote` to delete them (only those still garbage "
                         "then).")
        return "\n".join(lines)
    line = f"Deleted {objects(body['deleted_objects'])} ({size(body['deleted_bytes'])}) " \
        f"from {body['store']}"
    if body["skipped_objects"]:
        line += f"; {objects(body['skipped_objects'])} the dry run listed are no longer " \
            "garbage (or changed since), kept"
    return line + "."


def _duration(seconds: int) -> str:
    for unit, length in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= length and seconds % length == 0 or seconds >= 10 * length:
            return f"{seconds // length}{unit}"
    return f"{seconds}s"


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
