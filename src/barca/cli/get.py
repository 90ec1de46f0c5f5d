"""`barca get` and `barca run`: compute targets (or run tasks) and print the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from barca.cli import render
from barca.cli.load import split_positionals
from barca.cli.output import (choose_listing_mode, emit, emit_json, json_text, parse_fields,
                              table)
from barca.views.listing import pick_fields
from barca.cli.progress import CliReporter
from barca.cli.server_option import server_options
from barca.engine.driver import run
from barca.engine.events import Reporter
from barca.engine.result import RunResult
from barca.errors import StepFailed, UsageError
from barca.printable import note, printable, printable_lines
from barca.views.plan_text import first_line, plural
from barca.views.run_counts import key_counts
from barca.views.run_report import SHOWN_KEYS, STEP_FIELDS, DryRunReport, RunReport
from barca.views.run_values import current_results, key_paths
from barca.views.value_preview import pointer, pointer_line, table_preview

OUTPUTS = ("json", "pretty", "value", "path", "url")
MODE_VALUES = {"json": "summary", "pretty": "first", "value": "all", "path": "none",
               "url": "none"}


def _run_options(fn):
    options = [
        click.option("--refresh", metavar="A,B", help="Recompute these assets (one comma list) "
                     "and what reads them inside the target's cone (past a cutoff=True or "
                     "Manual asset only if its bytes change). The one way a Manual asset "
                     "is computed."),
        click.option("--no-cascade", is_flag=True, help="With --refresh: recompute only the "
                     "named assets, not what reads them."),
        click.option("--refresh-all", is_flag=True, help="Recompute every asset in the cone."),
        click.option("--dry-run", is_flag=True, help="Say what would run and why; execute and "
                     "write nothing (sensors are observed)."),
        click.option("--json", "json_flag", is_flag=True, help="JSON output (default when "
                     "stdout is not a terminal)."),
        click.option("--pretty", is_flag=True, help="Human output (default in a terminal)."),
        click.option("-o", "--output", type=click.Choice(OUTPUTS), help="What to print: "
                     "json or pretty (as --json, --pretty), value (only the target's value, "
                     "every key's), path (its result files, one line per key), url (a signed "
                     "link to each in the remote store, barca docs remote). With --json, "
                     "value or path fill the JSON's final_output (past 1,000 keys it is "
                     "otherwise a summary)."),
        click.option("--expires", metavar="30m|12h|7d|SECONDS", help="With -o url: how long "
                     "the links work (default 1h, at most 7d)."),
        click.option("--fields", metavar="A,B", help="Keep only these keys of each step "
                     "(implies JSON): " + ", ".join(STEP_FIELDS) + "."),
        click.option("--partition", multiple=True, metavar="DIM=V[,V]",
                     help="Run only these keys of every node with dimension DIM "
                     "(repeatable; or a JSON object). Fan-ins over all keys are skipped; naming one "
                     "as a target or in --refresh is exit 2."),
        click.option("--batch", multiple=True, metavar="none|all|N|NODE=V",
                     help="Group the stale keys of batched nodes (batch=) differently for this "
                     "run: none, all or N for every one, NODE=V for one (repeatable). "
                     "Recomputes nothing by itself."),
        click.option("--agent", is_flag=True, help="Plain `[barca] step:` progress lines on "
                     "stderr instead of a progress bar."),
        click.option("--env", "env_name", metavar="NAME", help="Use a separate cache and "
                     "history under .barca/envs/NAME (or set BARCA_ENV)."),
        click.option("--executor", type=click.Choice(("local", "ray")),
                     help="What runs the steps: worker processes on this machine (local, the "
                     "default) or a Ray cluster (ray: RAY_ADDRESS, else a Ray of this "
                     "machine; barca docs scale-out). Or set BARCA_EXECUTOR, or [executor] "
                     "kind in barca.toml."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return click.argument("args", nargs=-1)(server_options(fn))


GET_HELP = """Compute TARGET (an asset or sensor, or a,b) and what it needs; print its value.

\b
Without a target, every asset and sensor in FILES is brought up to date. An asset that
runs also writes its @sink copies (barca docs assets).
\b
Examples:
  barca get summary pipeline.py
  barca get summary pipeline.py --dry-run
  barca get scored pipeline.py --refresh cleaned
  barca get scored pipeline.py --refresh scored --batch scored=all
  barca get scored pipeline.py --executor ray
  barca get pipeline.py --json
"""

RUN_HELP = """Run TASK (or a,b): tasks always run; their asset inputs come from cache.

\b
Examples:
  barca run publish pipeline.py
  barca run publish pipeline.py --refresh summary
"""


@click.command("get", help=GET_HELP)
@_run_options
def get_command(**options) -> None:
    _execute("get", **options)


@click.command("run", help=RUN_HELP)
@_run_options
def run_command(**options) -> None:
    _execute("run", **options)


def _execute(command, args, refresh, no_cascade, refresh_all, dry_run, json_flag, pretty,
             output, expires, fields, partition, batch, agent, env_name, executor) -> None:
    mode, values = output_mode(json_flag, pretty, output, fields, dry_run)
    seconds = link_seconds(output, expires, env_name)
    target, paths = split_positionals(args, takes_target=True)
    ledger = _ledger()
    plain = command == "get" and ledger is None and not (
        refresh or no_cascade or refresh_all or dry_run or agent or fields or partition
        or batch or env_name or output)
    run_and_print(command, target, paths, mode, parse_fields(fields, STEP_FIELDS),
                  CliReporter(agent), values, env=env_name, refresh=refresh,
                  refresh_all=refresh_all, partition=partition, cascade=not no_cascade,
                  dry_run=dry_run, batch=batch, keep_answer=plain, expires=seconds,
                  ledger=ledger, executor=executor)


def _ledger():
    """The configured server's ledger this run consults (cli.server_option), or None."""
    from barca.cli.server_option import ledger_server

    configured = ledger_server()
    if configured is None:
        return None
    from barca.engine.ledger_client import LedgerClient
    from barca.printable import note

    return LedgerClient(configured.url, say=note)


def link_seconds(output: str | None, expires: str | None, env_name: str | None) -> int | None:
    """`-o url`'s link lifetime, refused before anything runs when the project has no store
    that signs links; None for any other output."""
    from barca.store.remote_results import DEFAULT_EXPIRES, check_signable, expires_seconds

    if output != "url":
        if expires is not None:
            raise UsageError("--expires is how long -o url's links work",
                             "add -o url, or drop --expires")
        return None
    from barca.project import open_project
    from barca.store.remote_config import remote_of

    seconds = DEFAULT_EXPIRES if expires is None else expires_seconds(expires)
    check_signable(remote_of(open_project(env_name).settings))
    return seconds


def run_and_print(command: str, target: str | None, paths: list[str], mode: str,
                  fields: list[str] | None, reporter: Reporter, values: str | None = None,
                  keep_answer: bool = False, expires: int | None = None,
                  absolute_paths: bool = False, **options: Any) -> None:
    """Run through the driver (`options` are `driver.run`'s) and print what `barca get|run`
    prints: the report on stdout in `mode`, its notes on stderr, then StepFailed when a step
    failed. `values`: what the report's `final_output` holds (run_report.VALUES; by default
    what `mode` shows; "none" for a scheduled tick nobody reads). `keep_answer`: a plain
    `barca get`, whose answer is kept when it qualifies (engine.cached_get). `expires`:
    seconds `-o url`'s links work. `absolute_paths`: `-o path` prints absolute paths (a
    server's run: its client is never in the server's project root)."""
    result = run(command, target, paths, reporter=reporter, **options)
    env_name = options.get("env")
    if options.get("dry_run"):
        report = DryRunReport(result, command, target)
        _say(report.notes(paths, env_name))
        _print_dry_run(report, mode, fields)
        return
    report = RunReport(result, command, target, values or MODE_VALUES[mode])
    body = report.to_json()
    notes = report.notes(paths, env_name)
    _say(notes)
    _print_run(report, body, mode, fields, expires, absolute_paths)
    if keep_answer and not notes and values is None and mode in ("json", "pretty"):
        _keep_answer(report, body if mode == "json" else None, paths)


def _keep_answer(report: RunReport, body: dict | None, paths: list[str]) -> None:
    """What the run printed in either mode (JSON, or the human text), each with the values
    that differ from run to run marked, for `cached_get.remember` (which checks that each
    agrees with its marked one). `body`: the JSON's, if it was printed."""
    from barca.engine.cached_get import qualifies, remember
    from barca.project import open_project

    result, command, target = report.result, report.command, report.target
    if not qualifies(result):
        return
    body = body or RunReport(result, command, target, MODE_VALUES["json"]).to_json()
    template = json_text({k: f"\x00{k}\x00" if k in MARKED else v for k, v in body.items()})
    for name in MARKED:  # JSON writes the mark as \u0000: back to the mark itself
        template = template.replace(f'"\\u0000{name}\\u0000"', f"\x00{name}\x00")
    human = RunReport(result, command, target, MODE_VALUES["pretty"])
    lines = _human_lines(human, human.to_json())
    text = _joined(lines)
    first = lines[0].replace(f"Run {result.run_id} |", "Run \x00run\x00 |", 1).replace(
        f" in {result.elapsed:.3f}s (", " in \x00elapsed\x00s (", 1)
    remember(open_project(None, Path.cwd()), result, target, paths, {
        "json": (json_text(body) + "\n", template + "\n"),
        "pretty": (text, _joined([first, *lines[1:]]))})


MARKED = ("run_id", "elapsed_seconds", "metadata_seconds")  # the JSON's values of one run


def _say(notes: list[str]) -> None:
    for line in notes:
        note(line)


def output_mode(json_flag: bool, pretty: bool, output: str | None, fields: str | None,
                 dry_run: bool) -> tuple[str, str | None]:
    """--json / --pretty / -o / --fields: which one prints, refused when they disagree, and
    what `final_output` holds when it is not what the mode shows (`--json -o value|path`:
    the JSON with every value, or every path)."""
    if json_flag and output in ("value", "path"):
        if dry_run:
            raise UsageError(f"--json -o {output} chooses what a run's final_output holds; "
                             "a dry run has none", "drop -o, or --dry-run")
        return "json", "all" if output == "value" else "paths"
    if output is not None and (json_flag or pretty):
        raise UsageError("-o cannot be combined with --json or --pretty",
                         f"pass only -o {output} (or --json -o value|path)")
    if fields is not None and output in ("pretty", "value", "path", "url"):
        raise UsageError(f"--fields selects JSON keys and cannot be used with -o {output}",
                         "drop --fields, or use -o json")
    if output in ("path", "url") and dry_run:
        what = "result files" if output == "path" else "links to results"
        raise UsageError(f"-o {output} prints {what}, which a dry run does not write",
                         "drop --dry-run, or use -o value to print the planned steps")
    return output or choose_listing_mode(json_flag, pretty, fields), None


def _print_dry_run(report: DryRunReport, mode: str, fields: list[str] | None) -> None:
    result = report.result
    if mode == "pretty":
        emit(render.dry_run_table(report.command, report.target,
                                  [result.plans[n] for n in result.order], result.batch_plans))
        return
    if mode == "value":
        emit_json(pick_fields(report.steps(), fields), indent=True)
        return
    body = report.to_json()
    body["steps"] = pick_fields(body["steps"], fields)
    emit_json(body)


def _print_run(report: RunReport, body: dict, mode: str, fields: list[str] | None,
               expires: int | None = None, absolute_paths: bool = False) -> None:
    result = report.result
    body["steps"] = pick_fields(body["steps"], fields)
    if mode == "json":
        emit_json(body)
    elif mode == "value":
        _print_value(body)
    elif mode == "path":
        _print_paths(result, absolute_paths)
    elif mode == "url":
        _print_urls(result, expires)
    else:
        _print_human(report, body)
    if result.failed:
        _raise_failure(result, result.failed[0])


def _print_human(report: RunReport, body: dict) -> None:
    for line in _human_lines(report, body):
        emit(line)


def _human_lines(report: RunReport, body: dict) -> list[str]:
    """What the human output prints, each piece as `emit` takes it."""
    command, target, result = report.command, report.target, report.result
    what = f"'{printable(target)}'" if target else "all assets"
    if result.failed:
        lines = [f"Run {result.run_id} | {command} {what} failed after {result.elapsed:.3f}s "
                 f"({key_counts(result).text()})"]
    else:
        verb = "ran" if command == "run" else "got"
        lines = [f"Run {result.run_id} | {verb} {what} in {result.elapsed:.3f}s "
                 f"({plural(result.executed, 'step')}, {plural(result.phases, 'phase')})"]
    if "final_output" in body:
        lines += _pretty_value(report, body["final_output"])
    return lines


def _pretty_value(report: RunReport, value: Any) -> list[str]:
    """The target's value for a person: labelled with the target's name when none was given
    (barca chose it), a table as its first rows, any other file result as its path."""
    import orjson

    result = report.result
    node_id = result.final_node()
    label = "Value:" if report.target else \
        f"Value of '{printable(result.graph.nodes[node_id].name)}' (the last asset; " \
        "name a target to choose another):"
    lines = ["\n" + label]
    found = pointer(value)
    if found is not None:
        preview = table_preview(result, node_id, found)
        if preview is None:
            return lines + [printable(pointer_line(found))]
        lines += [printable_lines(preview.heading()),
                  table(preview.columns, [list(row) for row in preview.rows])]
        return lines + ([preview.more()] if preview.more() else [])
    more = report.keys_with_value() - len(value) if \
        isinstance(value, dict) and len(value) == SHOWN_KEYS else 0
    if isinstance(value, dict) and any(pointer(v) is not None for v in value.values()):
        lines.append(printable_lines([f"{key}: " + (pointer_line(pointer(v)) if pointer(v) else
                                                    orjson.dumps(v, default=str).decode())
                                      for key, v in value.items()]))
    else:
        shown = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
                             default=str).decode()
        lines.append(printable_lines(shown.split("\n")))  # JSON leaves DEL, C1, U+2028 as is
    if more:
        lines.append(f"... and {more} more keys (-o value gives every key)")
    return lines


def _joined(lines: list[str]) -> str:
    """The lines as `emit` writes them, one after the other."""
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _print_value(body: dict) -> None:
    """`-o value`: the target's value alone (several targets: {target: value or null})."""
    if "targets" in body:
        value = {name: t.get("final_output") for name, t in body["targets"].items()}
    elif "final_output" in body:
        value = body["final_output"]
    else:
        return  # the target failed: the error follows on stderr
    emit_json(value, indent=True)


def _print_paths(result: RunResult, absolute: bool = False) -> None:
    """`-o path`: each target's current result files, one line per key in label order
    (absolute when asked or when the current directory is not the project root, else as the
    JSON gives them)."""
    here = not absolute and Path.cwd().resolve() == Path(result.root).resolve()
    base = None if here else str(result.artifacts_dir)
    lines = []
    for node_id in result.targets or [result.final_node()]:
        found = key_paths(result, node_id, base)
        lines += found.values() if isinstance(found, dict) else [found] if found else []
    if lines:
        emit("\n".join(lines))


def _print_urls(result: RunResult, expires: int) -> None:
    """`-o url`: a signed link to each target's current result in the remote store, one line
    per key in label order, as `-o path` prints their files."""
    from barca.store.remote_results import signed_url

    lines = []
    for node_id in result.targets or [result.final_node()]:
        if not result.plans[node_id].partitioned:
            found = result.key_of(node_id, "")
            keys = [found[0]] if found else []
        else:
            keys = [found[0] for _, found in current_results(result, node_id)]
        lines += [signed_url(result.store, key, expires) for key in keys]
    if lines:
        emit("\n".join(lines))


def _raise_failure(result: RunResult, failure) -> None:
    """The contract line, then the error (with its traceback) once, as the error report."""
    note(f"[barca] run failed: step '{failure.step_id}' failed (exit 1)")
    d = result.graph.nodes[failure.node_id]
    from barca.store.paths import node_dir_name

    headline = f"step '{failure.step_id}' failed"
    fix = "fix the step and rerun the same command; finished steps are kept"
    if (failure.error_message or "").startswith("importing "):  # the file, not the step
        headline += f": {failure.error_message.partition(': ')[0]}"
        fix = (f"fix the top-level code of {d.file} (it runs when the file is imported) and "
               "rerun; `barca doctor` finds names used there that are never defined")
    raise StepFailed(f"step '{failure.step_id}' failed: {failure.error_type}: "
                     f"{first_line(failure.error_message)}", fix, headline=headline,
                     node=failure.step_id, traceback=failure.traceback,
                     artifact_dir=f".barca/artifacts/{node_dir_name(d.file, d.name)}")