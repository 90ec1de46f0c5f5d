"""The `barca` command group, run in this process, and the one error handler.

Exit codes: 0 success, 1 a step failed, 2 usage error, 3 barca or the machine failed,
130 cancelled (Ctrl-C / SIGTERM). In JSON mode the last stderr line of a failure is the
envelope `{error, code, kind, remediation}`.
"""

from __future__ import annotations

import os
import sys

import click

from barca import __version__
from barca.cli.commands import ABOUT, COMMANDS, EPILOG
from barca.errors import BarcaError, UsageError

class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        import importlib

        module, attribute, _ = COMMANDS[name]
        return getattr(importlib.import_module(module), attribute)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, text) for name, (_, _, text) in COMMANDS.items()])


@click.group(cls=LazyGroup, help=ABOUT, epilog=EPILOG,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="barca")
def cli() -> None:
    pass


def _json_mode(argv: list[str]) -> bool:
    if "--json" in argv or any(a.startswith("--fields") for a in argv):
        return True
    if "--pretty" in argv:
        return False
    for i, arg in enumerate(argv[:-1]):  # `-o json` / `-o pretty` choose as the flags do
        if arg in ("-o", "--output") and argv[i + 1] in ("json", "pretty"):
            return argv[i + 1] == "json"
    env = os.environ.get("BARCA_OUTPUT")
    if env in ("json", "pretty"):
        return env == "json"
    return not sys.stdout.isatty()


def database_error(exc: Exception) -> BarcaError | None:
    """An error of the metadata database that reached a command (InfraError, exit 3); None
    for any other exception, which stays a bug with its traceback."""
    if type(exc).__module__ != "sqlite3":
        return None
    from barca.errors import InfraError

    return InfraError(f"metadata database error: {exc}", "check that .barca/ is writable and "
                      "not corrupted; run `barca doctor`")


def report_error(error: BarcaError, json_mode: bool) -> None:
    from barca.printable import note, note_exact

    if json_mode:
        import orjson

        note_exact(orjson.dumps(error.envelope(), default=str).decode())
        return
    for line in error.human_lines():
        note(line)


def main(argv: list[str]) -> None:
    from barca.cli.output import guard_stdout

    json_mode = _json_mode(argv)
    guard_stdout()
    try:
        from barca.cli.server_option import take_server

        url, argv = take_server(argv)
        if url is not None:
            from barca.cli.remote import run_remote

            sys.exit(run_remote(url, argv, json_mode))
        cli.main(args=argv, prog_name="barca", standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.ClickException as exc:
        report_error(UsageError(exc.format_message(), "run `barca --help` or "
                                "`barca COMMAND --help` for the accepted arguments"), json_mode)
        sys.exit(2)
    except click.exceptions.Abort:
        sys.exit(130)
    except BarcaError as exc:
        report_error(exc, json_mode)
        sys.exit(exc.exit_code)
    except Exception as exc:
        error = database_error(exc)
        if error is None:
            raise
        report_error(error, json_mode)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
