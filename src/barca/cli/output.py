"""Output mode and printing: stdout carries the result only, stderr everything else.

Mode: `--json` / `--pretty` flag, then `BARCA_OUTPUT`, then whether stdout is a terminal.
A reader that closes the pipe early (`| head`) is not an error.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import orjson

from barca.errors import UsageError


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


def emit(text: str) -> None:
    """Write the result to stdout, tolerating a closed pipe."""
    try:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


def emit_json(obj: Any, indent: bool = False) -> None:
    option = orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    emit(orjson.dumps(obj, option=option, default=str).decode())


def note(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except BrokenPipeError:
        pass


def _silence_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def table(headers: list[str], rows: list[list[str]]) -> str:
    """A plain aligned text table; the last column is never padded."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [headers, *rows]:
        cells = [c.ljust(widths[i]) for i, c in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)
