"""`barca logs [RUN_ID]`: what a run's steps printed to stdout and stderr, in order.

Only the steps' own lines are stored (barca's progress lines never are), so this is the
output of the user's code alone. Plain text by default, whatever stdout is, so that it can be
piped to grep; `--pretty` groups lines by step; `--json` gives one object per line.
"""

from __future__ import annotations

import os
from typing import Any

import click

from barca.views.history import find_run, open_history
from barca.views.log_lines import line_json as _line_json, match_steps
from barca.views.log_lines import unknown_step as _unknown_step
from barca.cli.output import emit, emit_json
from barca.cli.server_option import server_options
from barca.errors import UsageError
from barca.printable import note, printable, printable_lines
from barca.store import history as store
from barca.store.db import Connection
from barca.views.plan_text import first_line
from barca.views.times import iso_time, utc_time

HELP = """Print what each step of a run wrote to stdout and stderr, in order.

\b
Without RUN_ID, the newest run. --step takes a function name (every key of it), a node id,
or one key: 'scored[retailer=r7]'. Lines are printed as `[STEP] line`; with a --step that
names one step, bare; --timestamps starts each with the moment it was written (UTC, as JSON
writes it). --follow (-f) keeps printing a running run's lines until it ends and
exits as the run did (with --json, one object a line).
\b
Examples:
  barca logs 3bc29e9a2595
  barca logs 3bc29e9a2595 --step 'scored[retailer=r7]' --stream stderr
  barca logs --pretty
  barca logs -f
"""


@click.command("logs", help=HELP)
@server_options
@click.argument("run_id", required=False)
@click.option("--step", metavar="STEP", help="Only this step: a name, a node id, or one key "
              "such as 'scored[retailer=r7]'.")
@click.option("--stream", type=click.Choice(["stdout", "stderr"]),
              help="Only lines written to this stream.")
@click.option("--json", "json_flag", is_flag=True, help="One JSON object per line, in a list.")
@click.option("--pretty", is_flag=True, help="Group the lines by step, with a heading each.")
@click.option("--timestamps", is_flag=True, help="Start each line with the moment it was "
              "written (RFC 3339 UTC, milliseconds); JSON always has it as `ts`.")
@click.option("--env", "env_name", metavar="NAME", help="Read the runs of environment NAME "
              "(or set BARCA_ENV).")
@click.option("-f", "--follow", is_flag=True, help="Keep printing lines as a running run "
              "writes them, until it ends; exit as the run did (0, 1 failed, 130 cancelled, "
              "3 interrupted).")
def logs_command(run_id, step, stream, json_flag, pretty, timestamps, env_name,
                 follow) -> None:
    mode = chosen_mode(json_flag, pretty, follow)
    _, conn = open_history(env_name)
    run = _the_run(conn, run_id, env_name)
    if follow:
        _follow(conn, run, step, stream, mode, timestamps)
        return
    chosen = None
    if step is not None:
        chosen = match_steps(store.step_ids(conn, run.run_id), step)
        if not chosen:
            raise _unknown_step(conn, run.run_id, step)
        chosen = store.call_step_ids(conn, run.run_id, chosen)  # a batched key: its call's
    lines = store.run_logs(conn, run.run_id, chosen, stream)
    if not lines:
        note(_wrote_nothing(run.run_id, step, chosen, stream))
    if mode == "json":
        emit_json([_line_json(line) for line in lines], indent=True)
    elif mode == "pretty":
        _print_grouped(lines, timestamps)
    else:
        bare = chosen is not None and len(chosen) == 1
        if lines:
            emit(printable_lines(_text(line, bare, timestamps) for line in lines))


def chosen_mode(json_flag: bool, pretty: bool, follow: bool) -> str:
    """json, pretty or text; --follow cannot group lines by step."""
    mode = _mode(json_flag, pretty)
    if follow and mode == "pretty":
        raise UsageError("--follow prints lines as they come and cannot group them by step",
                         "drop --pretty (plain lines), or use --json (one object a line)")
    return mode


def _text(line: store.LogRow, bare: bool, timestamps: bool) -> str:
    """A line as text prints it: `[STEP] line`, bare, or after its moment."""
    return line_text(line.step_id, line.line, iso_time(line.ts), bare, timestamps)


def line_text(step_id: str, text: str, moment: str | None, bare: bool,
              timestamps: bool) -> str:
    """`[STEP] text`, or `text` bare; after its `moment` (RFC 3339) with --timestamps."""
    text = text if bare else f"[{step_id}] {text}"
    return f"{moment} {text}" if timestamps else text


def followed_bare(step: str | None, step_id: str) -> bool:
    """A followed line is printed bare when --step names one step of it."""
    return step is not None and ("[" in step or "[" not in step_id)


POLL_SECONDS = 0.2  # how often a follower looks for new lines (the run writes them twice a second)


def _follow(conn: Connection, run: store.RunRow, step: str | None,
            stream: str | None, mode: str, timestamps: bool) -> None:
    """Print the run's lines as they are recorded, then end as the run ended. The run's row
    is read before its lines, so the lines read after it says `finished` are all of them."""
    import time

    last = 0
    while True:
        store.reconcile_interrupted(conn)  # a run whose process died ends the follow too
        current = store.get_run(conn, run.run_id) or run
        lines = store.run_logs(conn, run.run_id, None, stream, after=last)
        if lines:
            last = lines[-1].seq
        if step is not None:
            lines = [line for line in lines if match_steps([line.step_id], step)]
        for line in lines:
            if mode == "json":
                emit_json(_line_json(line))
            else:
                emit(printable(_text(line, followed_bare(step, line.step_id), timestamps)))
        if current.status != "running":
            break
        time.sleep(POLL_SECONDS)
    end_as(current)


def end_as(run: Any) -> None:
    """A followed run that did not succeed ends the command with the run's own exit code
    (`run`: its run_id, status, failed_node and error, as a row or a server's JSON has them)."""
    from barca.errors import Cancelled, InfraError, StepFailed

    note(f"barca: run {run.run_id} ended: {run.status}")
    see = f"barca history {run.run_id}"
    if run.status == "failed":
        raise StepFailed(f"run {run.run_id} failed: step '{run.failed_node}' failed: "
                         f"{first_line(run.error)}", f"see {see}", node=run.failed_node)
    if run.status == "cancelled":
        raise Cancelled(f"run {run.run_id} was cancelled", f"see {see}")
    if run.status == "interrupted":
        raise InfraError(f"run {run.run_id} was interrupted: its process ended without "
                         "recording an outcome", f"see {see}; rerun its command")


def _mode(json_flag: bool, pretty: bool) -> str:
    if json_flag and pretty:
        raise UsageError("--json and --pretty cannot be used together", "pass one of them")
    if json_flag or pretty:
        return "json" if json_flag else "pretty"
    env = os.environ.get("BARCA_OUTPUT")
    if env and env not in ("json", "pretty"):
        raise UsageError(f"BARCA_OUTPUT={env!r} is not valid",
                         "set BARCA_OUTPUT to json or pretty, or unset it")
    return "json" if env == "json" else "text"


def _the_run(conn: Connection | None, run_id: str | None, env_name: str | None
             ) -> store.RunRow:
    if run_id is not None:
        return find_run(conn, run_id, env_name)
    run = store.newest_run(conn) if conn is not None else None
    if run is None:
        raise no_run_yet(env_name)
    note(newest_note(run.run_id, run.command, run.target, run.status,
                     utc_time(run.started_at)))
    return run


def no_run_yet(env_name: str | None) -> UsageError:
    return UsageError("no run has been recorded yet" +
                      (f" in environment '{env_name}'" if env_name else ""),
                      "run `barca get TARGET pipeline.py` first")


def newest_note(run_id: str, command: str, target: str | None, status: str,
                started: str | None) -> str:
    """Said when no RUN_ID was given: whose logs these are (`started`: UTC, human)."""
    return (f"barca: logs of the most recent run: {run_id} ({command} {target or 'all'}, "
            f"{status}, started {started} UTC)")


def _wrote_nothing(run_id: str, step: str | None, chosen: list[str] | None,
                   stream: str | None) -> str:
    """Said on stderr when there is no line to print: an empty answer alone reads as a broken
    command, or as a step that never ran."""
    where = f"to {stream}" if stream else "to stdout or stderr"
    if step is None:
        return f"barca: no step of run {run_id} wrote anything {where}"
    what = f"step '{chosen[0]}'" if len(chosen) == 1 else \
        f"the {len(chosen)} steps of '{step}'"
    return f"barca: {what} ran in run {run_id} and wrote nothing {where}"


def _print_grouped(lines: list[store.LogRow], timestamps: bool) -> None:
    groups: dict[str, list[store.LogRow]] = {}
    for line in lines:
        groups.setdefault(line.step_id, []).append(line)
    blocks = []
    for step_id, rows in groups.items():
        body = [f"  {iso_time(r.ts) + ' ' if timestamps else ''}"
                f"{'[stderr] ' if r.stream == 'stderr' else ''}{r.line}" for r in rows]
        count = f"{len(rows)} line{'s' if len(rows) != 1 else ''}"
        blocks.append(printable_lines([f"── {step_id} ({count})", *body]))
    if blocks:
        emit("\n\n".join(blocks))
