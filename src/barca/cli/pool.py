"""`barca pool`: the warm pools this user has running (one per project), and stopping them."""

from __future__ import annotations

from pathlib import Path

import click

OUTPUT = [click.option("--json", "json_flag", is_flag=True, help="JSON output."),
          click.option("--pretty", is_flag=True, help="Human output.")]


def _output_options(function):
    for option in reversed(OUTPUT):
        function = option(function)
    return function


@click.group("pool", invoke_without_command=True)
@_output_options
@click.pass_context
def pool_command(ctx: click.Context, json_flag: bool, pretty: bool) -> None:
    """List this user's warm pools: pid, project, memory, time since the last run.

    A warm pool is the background process a project's runs fork their workers from (see
    `barca docs cache`). Each exits on its own after BARCA_WARM_SECONDS without a run (900 by
    default; the newest run's value applies), when barca, the interpreter, the installed
    packages or the environment change, and when more than BARCA_WARM_POOLS are running
    (one per core, at least four: the least recently used exits first).

    \b
    Examples:
      barca pool                 the running pools
      barca pool stop            stop this project's pool
      barca pool stop --all      stop every pool of this user
    """
    if ctx.invoked_subcommand is not None:
        return
    from barca.cli.output import choose_mode, emit, emit_json
    from barca.views.plan_text import human_size
    from barca.engine.local import warm_pools

    pools = warm_pools()
    if choose_mode(json_flag, pretty) == "json":
        from barca.views.times import iso_time

        emit_json({"pools": [{**p, "started_at": iso_time(p["started_at"])} for p in pools]})
        return
    if not pools:
        emit("no warm pool is running")
        return
    rows = [(str(p["pid"]), p["project"], human_size((p["rss_bytes"] or 0) + p["spare_bytes"]),
             f"{p['idle_seconds']:.0f}s" + (" (stopped)" if p["stopped"] else ""),
             f"{p['exits_after_idle_seconds']:g}s") for p in pools]
    head = ("PID", "PROJECT", "MEMORY", "IDLE", "EXITS AFTER IDLE")
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]
    emit("\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                   for row in (head, *rows)))


@pool_command.command("stop")
@click.option("--all", "stop_all", is_flag=True, help="Every pool of this user, not only "
              "this project's.")
@_output_options
def stop_command(stop_all: bool, json_flag: bool, pretty: bool) -> None:
    """Stop this project's warm pool (or, with --all, every one); the next run starts fresh
    and leaves a new pool behind unless BARCA_WARM_SECONDS=0.

    \b
    Examples:
      barca pool stop
      barca pool stop --all --json
    """
    from barca.cli.output import choose_mode, emit, emit_json
    from barca.engine.local import stop_warm_pools
    from barca.project_root import find_root

    mode = choose_mode(json_flag, pretty)
    stopped = stop_warm_pools(None if stop_all else find_root(Path.cwd()))
    if mode == "json":
        emit_json({"stopped": stopped})
    elif stopped:
        emit(f"stopped warm pool{'s' if len(stopped) > 1 else ''} "
             + ", ".join(f"pid {pid}" for pid in stopped))
    else:
        emit("no warm pool was running" + ("" if stop_all else " for this project"))
