"""`barca state backups | restore | reset`: the copies of the metadata database a reset or a
restore left, putting one back, and emptying the database (`engine.serving` does each, as
`barca serve` does its reset; `barca docs maintenance` says when to use which)."""

from __future__ import annotations

import sys

import click

from barca.cli.output import choose_mode, emit, emit_json
from barca.errors import UsageError
from barca.printable import note

OPTIONS = [
    click.option("--json", "json_flag", is_flag=True, help="JSON output (default when stdout is "
                 "not a terminal)."),
    click.option("--pretty", is_flag=True, help="Human output (default in a terminal)."),
    click.option("--env", "env_name", metavar="NAME", help="The database of environment NAME "
                 "(or set BARCA_ENV)."),
]


def _options(function):
    for option in reversed(OPTIONS):
        function = option(function)
    return function


@click.group("state")
def state_command() -> None:
    """The metadata database: its backups, a restore, a reset.

    \b
    Examples:
      barca state backups               the copies kept beside the database
      barca state restore               put the newest one back
      barca state restore 2             put back the second newest
      barca state reset --yes           empty the database (a copy is kept)
    """


@state_command.command("backups", short_help="The copies a reset or a restore left, "
                       "newest first.")
@_options
def backups_command(json_flag, pretty, env_name) -> None:
    """List the copies of the metadata database a reset or a restore left, newest first."""
    from barca.views.backups import backups_json, backups_text

    mode = choose_mode(json_flag, pretty)
    body = backups_json(_db_path(env_name))
    if mode == "json":
        emit_json(body, indent=True)
    else:
        emit(backups_text(body))


@state_command.command("restore", short_help="Put a backup back as the database.")
@click.argument("backup", required=False)
@click.option("--from", "from_", metavar="BACKUP", help="The same as BACKUP (as 0.33 writes it).")
@_options
def restore_command(backup, from_, json_flag, pretty, env_name) -> None:
    """Put a backup back as the metadata database: BACKUP is its number in `barca state
    backups` (1 = newest), its name, or the path of a copy; the newest without it.

    The backup is checked first (a whole SQLite database, its integrity, barca's tables, a
    format this barca reads). The database as it is now is kept beside it as
    metadata.db.pre-restore-<UTC> (restore that one to undo). Refused while a `barca serve`
    runs on the project or a run is in progress.
    """
    import barca.engine.serving as serving
    from barca.views.backups import chosen_backup

    if backup and from_:
        raise UsageError("BACKUP and --from name the same thing", "pass one of them")
    mode = choose_mode(json_flag, pretty)
    db_path = _db_path(env_name)
    source = chosen_backup(db_path, backup or from_)
    if not (backup or from_):
        note(f"barca: restoring the newest backup, {source.name}")
    body = serving.restore_unserved(db_path, source)
    if mode == "json":
        emit_json(body, indent=True)
        return
    newest = f", newest {body['last_run_id']}" if body["last_run_id"] else ""
    emit(f"Restored {body['database']} from {body['restored']} ({body['runs']} "
         f"run{'s' * (body['runs'] != 1)}{newest}).\nThe database before it is kept as "
         f"{body['pre_restore']} (undo: {body['undo']}).")


@state_command.command("reset", short_help="Empty the database (a copy is kept).")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for a confirmation.")
@_options
def reset_command(yes, json_flag, pretty, env_name) -> None:
    """Empty the metadata database (every run, result record and key state), keeping a copy
    of it beside it as metadata.db.reset-<UTC> (`barca state restore` puts it back).

    Result files stay on disk, referenced by nothing: the next `barca get` computes every
    result again (`barca gc` removes the old files). Asks first in a terminal; elsewhere
    --yes is required. Refused while a `barca serve` runs on the project (reset through it:
    POST /state/reset) or a run is in progress.
    """
    import barca.engine.serving as serving

    mode = choose_mode(json_flag, pretty)
    db_path = _db_path(env_name)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError("a reset empties the metadata database and needs a confirmation",
                             "pass --yes (a copy is kept: `barca state restore` undoes it)")
        answer = click.prompt(f"Empty {db_path} (every run, result record and key state; a "
                              "copy is kept beside it)? [y/N]", default="", show_default=False,
                              err=True)
        if answer.strip().lower() not in ("y", "yes"):
            click.echo("Nothing changed.", err=True)
            return
    body = serving.reset_unserved(db_path)
    if mode == "json":
        emit_json(body, indent=True)
        return
    runs, records = body["runs_removed"], body["materializations_removed"]
    emit(f"Emptied {body['database']}: {runs} run{'s' * (runs != 1)} and {records} result "
         f"record{'s' * (records != 1)} removed.\nA copy is kept as {body['backup']} (undo: "
         f"{body['undo']}).")


def _db_path(env_name: str | None):
    from barca.project import open_project

    return open_project(env_name).db_path
