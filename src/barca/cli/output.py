"""Output mode and printing: stdout carries the result only, stderr everything else.

Mode: `--json` / `--pretty` flag, then `BARCA_OUTPUT`, then whether stdout is a terminal.
A reader that closes the pipe early (`| head`) is not an error; stdout that cannot take the
result (a full disk, a hung-up terminal) is one of the machine's: exit 3 (`guard_stdout`).
"""

from __future__ import annotations

import io
import os
import sys
from typing import Any, Sequence

import orjson

from barca.errors import InfraError, UsageError
from barca.printable import note, printable
from barca.views.listing import page_hint


def choose_mode(json_flag: bool, pretty_flag: bool) -> str:
    if json_flag and pretty_flag:
        raise UsageError("--json and --pretty cannot be used together", "pass one of them")
    if json_flag:
        return "json"
    if pretty_flag:
        return "pretty"
    env = os.environ.get("BARCA_OUTPUT")
    if env:
        if env not in ("json", "pretty"):
            raise UsageError(f"BARCA_OUTPUT={env!r} is not valid",
                             "set BARCA_OUTPUT to json or pretty, or unset it")
        return env
    return "pretty" if sys.stdout.isatty() else "json"


def guard_stdout() -> None:
    """Route every write to stdout (the commands' results, click's --help and --version, a
    remote command's output) through `_GuardedStdout`, so that none of them can end the
    command with a traceback or with click's exit 1 for a closed pipe."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return  # not a file (None, or replaced by a caller): nothing of ours to guard
    stream.flush()
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(_GuardedStdout(fd)),
                                  encoding=getattr(stream, "encoding", None),
                                  errors=getattr(stream, "errors", None),
                                  line_buffering=getattr(stream, "line_buffering", False))


class _GuardedStdout(io.RawIOBase):
    """File descriptor 1 as the bottom of sys.stdout. A closed pipe silences it (the reader
    wanted no more); any other write error (EIO from a terminal that hung up, ENOSPC from a
    full disk) is raised once as an InfraError, then later writes are dropped, so that the
    error is reported once and the exit flush cannot fail again."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self.failed = False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def isatty(self) -> bool:
        return os.isatty(self.fd)

    def write(self, data: Any) -> int:
        if self.failed:
            return len(data)
        try:
            return os.write(self.fd, data)
        except BrokenPipeError:
            self.failed = True
            _silence_stdout()
            return len(data)
        except OSError as exc:
            self.failed = True
            raise InfraError(f"could not write the result to stdout: {exc.strerror or exc}",
                             "check where stdout goes (a full disk, a closed terminal) and run "
                             "the command again; a run is recorded before its result is "
                             "printed (barca history)", errno=exc.errno) from exc


def emit(text: str) -> None:
    """Write the result to stdout (`guard_stdout` says what happens when it cannot)."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    sys.stdout.flush()


def emit_json(obj: Any, indent: bool = False, default: Any = str) -> None:
    emit(json_text(obj, indent, default))


def json_text(obj: Any, indent: bool = False, default: Any = str) -> str:
    """What `emit_json` prints, without its newline."""
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    return orjson.dumps(obj, option=option, default=default).decode()




def _silence_stdout() -> None:
    """Point fd 1 at /dev/null: nothing written there later (by this process or a child)
    meets the closed pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table; the last column is never padded. Each cell is one line,
    its control characters escaped (barca.printable)."""
    headers = [printable(h) for h in headers]  # a SQL query's columns are named by the user
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [headers, *rows]:
        cells = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def choose_listing_mode(json_flag: bool, pretty_flag: bool, fields: str | None) -> str:
    """Like choose_mode, but `--fields` implies JSON and cannot go with `--pretty`."""
    if fields is not None and pretty_flag:
        raise UsageError("--fields selects JSON keys and cannot be used with --pretty",
                         "drop --pretty, or drop --fields to get the table")
    return "json" if fields is not None else choose_mode(json_flag, pretty_flag)


def parse_fields(text: str | None, valid: list[str]) -> list[str] | None:
    """`--fields a,b` checked against the keys an item can have; None when not given."""
    return parse_names(text, valid, "--fields", "field", "fields")


def parse_names(text: str | None, valid: Sequence[str], flag: str, what: str,
                whats: str) -> list[str] | None:
    """A comma list given to `flag`, each name one of `valid`; None when not given."""
    if text is None:
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in valid]
    if unknown or not names:
        raise UsageError(f"unknown {what} {', '.join(unknown) or repr(text)} for {flag}",
                         f"valid {whats}: {', '.join(valid)}")
    return names


def bounded(limit: int | None, show_all: bool, default: int) -> int | None:
    """How many items a listing shows: `--limit N`, every one with `--all` (None), else
    `default`. Both flags together contradict each other: exit 2, as the published barca."""
    if limit is not None and show_all:
        raise UsageError(f"--limit {limit} and --all contradict each other",
                         "pass --limit N for the first N, or --all for every one")
    return None if show_all else (limit or default)


def note_truncated(shown: int, total: int, noun: str) -> None:
    """The stderr line a human table prints when it shows fewer items than exist."""
    hint = page_hint(shown, total, noun)
    if hint:
        note(f"showing {shown} of {total} {noun}; {hint}")
