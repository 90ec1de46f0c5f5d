"""`barca list`, `barca status` and `barca plan`: read-only views of a pipeline."""

from __future__ import annotations

from typing import Any

import click

from barca.cli.load import split_positionals
from barca.cli.output import (bounded, choose_listing_mode, choose_mode, emit, emit_json,
                              note_truncated, parse_fields, table)
from barca.cli.server_option import server_options
from barca.errors import UsageError
from barca.printable import note
from barca.store.shape import shape_text
from barca.views import plan_text
from barca.views.listing import DEFAULT_NODES
from barca.views.node_list import LIST_FIELDS, node_groups, node_list
from barca.views.plan import plan_json
from barca.views.warning_text import warning_lines
from barca.views.status import STATES, STATUS_FIELDS, status_page, status_report
from barca.views.times import local_time, utc_time_of


@click.command("list")
@server_options
@click.argument("files", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output.")
@click.option("--pretty", is_flag=True, help="Human output.")
@click.option("-l", "--limit", type=click.IntRange(min=1), metavar="N",
              help="Show N nodes (default 100), in topological order.")
@click.option("--all", "show_all", is_flag=True, help="Show every node (not with --limit).")
@click.option("--fields", metavar="A,B", help="Keep only these keys of each node (implies "
              "JSON): " + ", ".join(LIST_FIELDS) + ".")
@click.option("--groups", "groups", is_flag=True, help="The groups (group(...)) that organise "
              "the nodes, as a tree: members and outputs.")
def list_command(files, json_flag, pretty, limit, show_all, fields, groups) -> None:
    """Every node: kind, freshness, inputs and declared env; a scheduled node's cron and when
    it would next fire (the table shows it in this machine's local time).

    \b
    Examples:
      barca list pipeline.py
      barca list pipeline.py --groups
    """
    if groups:
        _list_groups(files, choose_listing_mode(json_flag, pretty, None), fields)
        return
    mode = choose_listing_mode(json_flag, pretty, fields)
    chosen = parse_fields(fields, LIST_FIELDS)
    shown = bounded(limit, show_all, DEFAULT_NODES)
    _, paths = split_positionals(files, takes_target=False)
    nodes, body = node_list(paths, shown, chosen)
    if mode == "json":
        emit_json(body, indent=True)
        return
    scheduled = any("schedule" in n for n in nodes)
    rows = [[n["id"], n["kind"], freshness_cell(n),
             *([local_time(n.get("next_fire")) or "-"] if scheduled else []),
             ", ".join(n["inputs"]) or "-"] for n in nodes]
    emit(table(["NAME", "KIND", "FRESHNESS", *(["NEXT FIRE"] if scheduled else []), "DEPS"],
               rows))
    note_truncated(len(nodes), body["total"], "nodes")


def _list_groups(files: tuple[str, ...], mode: str, fields: str | None) -> None:
    if fields:
        raise UsageError("--fields picks keys of nodes, and --groups lists groups",
                         "drop --fields, or drop --groups")
    _, paths = split_positionals(files, takes_target=False)
    body = node_groups(paths)
    if mode == "json":
        emit_json(body, indent=True)
        return
    emit("\n".join(group_tree(body["groups"])) or "No groups declared.")


def group_tree(groups: list[dict[str, Any]]) -> list[str]:
    """Each top-level group, then what it holds, indented (a group's output marked `*`)."""
    by_id = {g["id"]: g for g in groups}
    inner = {m for g in groups for m in g["members"]}
    lines: list[str] = []

    def show(group: dict[str, Any], depth: int, mark: str) -> None:
        about = f": {group['description']}" if group["description"] else ""
        lines.append(f"{'  ' * depth}{group['name']} ({group['id']}){mark}{about}")
        for member in group["members"]:
            output = " *" if member == group["output"] else ""
            if member in by_id:
                show(by_id[member], depth + 1, output)
            else:
                lines.append(f"{'  ' * (depth + 1)}{member}{output}")

    for g in groups:
        if g["id"] not in inner:
            show(g, 0, "")
    if lines:
        lines.append("(* the group's output)")
    return lines


def freshness_cell(node: dict[str, Any]) -> str:
    """FRESHNESS in words that agree with `barca status`: tasks and sensors are
    `always-runs` there and here; an `Always` asset reruns only when stale."""
    if "schedule" in node:
        return f"cron: {node['schedule']}"
    if node["kind"] in ("task", "sensor"):
        return "always-runs"
    return "when-stale" if node["freshness"] == "always" else node["freshness"]




@click.command("status")
@server_options
@click.argument("args", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output.")
@click.option("--pretty", is_flag=True, help="Human output.")
@click.option("--env", "env_name", metavar="NAME", help="Environment to read.")
@click.option("-l", "--limit", type=click.IntRange(min=1), metavar="N",
              help=f"Show N nodes (default {DEFAULT_NODES}).")
@click.option("--all", "show_all", is_flag=True, help="Show every node (not with --limit).")
@click.option("--fields", metavar="A,B", help="Keep only these keys of each node (implies "
              "JSON): " + ", ".join(STATUS_FIELDS) + ".")
@click.option("--sample", type=click.IntRange(min=1), metavar="N", help="Add the first N rows "
              "(or entries) of each stored result to its shape, read from the file (never from "
              "a pickle).")
@click.option("--state", "states", metavar="S[,S]", help="Only nodes in these states: "
              + ", ".join(STATES) + " (hyphens accepted).")
@click.option("--problems", is_flag=True, help="Only nodes that need a look: last attempt "
              "failed, failed or blocked keys, a result file missing, or this machine's copy "
              "and a remote store's apart (unsynced).")
def status_command(args, json_flag, pretty, env_name, limit, show_all, fields, sample,
                   states, problems) -> None:
    """Cache state of every node (or of TARGET's cone), and why. Runs nothing, writes nothing.

    Sensors are assumed to return what they returned last time. Each node also shows its
    last execution (LAST RUN) and the shape of its stored result (SHAPE).

    \b
    Examples:
      barca status pipeline.py
      barca status summary pipeline.py --json
      barca status --problems
      barca status --state stale,never-run --fields id,cache
      barca status summary pipeline.py --sample 5
    """
    mode = choose_listing_mode(json_flag, pretty, fields)
    chosen = parse_fields(fields, STATUS_FIELDS)
    count = bounded(limit, show_all, DEFAULT_NODES)
    wanted = _parse_states(states)
    target, paths = split_positionals(args, takes_target=True)
    report = status_report(target, paths, env_name, wanted, problems)
    shown, body = status_page(report, target, count, chosen, sample)
    if mode == "json":
        emit_json(body, indent=True)
        return
    total, result, summary = len(report.nodes), report.result, report.summary
    short = {n: plan_text.why(result.plans[n], width=plan_text.WHY_WIDTH) for n in result.order}
    rows = [[n["id"], n["kind"], n["cache"]["state"].replace("_", "-"),
             n["cache"]["detail"] if n["cache"]["state"] == "blocked" else
             n["cache"]["reason"].replace("_", " ") if n["cache"]["state"] == "unsynced" else
             short[n["id"]],
             _last_run_cell(n["last_materialization"]), shape_text(n["shape"])]
            for n in shown]
    emit(table(["NAME", "KIND", "STATE", "WHY", "LAST RUN", "SHAPE"], rows))
    for node in shown:
        if node["shape"] and "sample" in node["shape"]:
            emit(f"\n{node['id']} (first rows):\n" + _sample_text(node["shape"]["sample"]))
    emit("\n" + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in summary.items()))
    note_truncated(len(shown), total, "nodes")


def _sample_text(sample: Any) -> str:
    """A sample as indented JSON lines, each line escaped (barca.printable)."""
    import orjson

    from barca.printable import printable_lines

    text = orjson.dumps(sample, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS,
                        default=str).decode()
    return printable_lines(["  " + line for line in text.splitlines()])


def _parse_states(text: str | None) -> set[str] | None:
    if text is None:
        return None
    names = {t.strip().replace("-", "_") for t in text.split(",") if t.strip()}
    unknown = sorted(names - set(STATES))
    if unknown or not names:
        raise UsageError(f"unknown state {', '.join(unknown) or repr(text)} for --state",
                         f"valid states: {', '.join(STATES)}")
    return names


def _last_run_cell(last: dict[str, Any] | None) -> str:
    if not last:
        return "-"
    secs = "" if last["elapsed_seconds"] is None else f" {last['elapsed_seconds']:.2f}s"
    return f"{last['status']} {utc_time_of(last['created_at'])}{secs}"


@click.command("plan")
@click.argument("files", nargs=-1)
@click.option("--json", "json_flag", is_flag=True, help="JSON output (plan always prints "
              "JSON; accepted as every command accepts it).")
@click.option("--pretty", is_flag=True, help="Indented JSON (plan's only output; accepted as "
              "every command accepts it).")
@click.option("--partition", multiple=True, metavar="DIM=V[,V]", help="Say what this "
              "selection (as get --partition takes it) would narrow and skip: "
              "partition_selection.")
def plan_command(files, json_flag, pretty, partition) -> None:
    """The execution phases of every node, as JSON (reads no stored state), with the
    run's capacity and each node's weight.

    \b
    Examples:
      barca plan pipeline.py
      barca plan pipeline.py --partition region=emea
    """
    if json_flag and pretty:
        choose_mode(json_flag, pretty)  # the usage error every command gives
    _, paths = split_positionals(files, takes_target=False)
    body = plan_json(paths, partition)
    for line in warning_lines(body["warnings"]):
        note(line)
    emit_json(body, indent=True)