"""`barca --help` and `barca --version` (`-V`) without importing click: the two answers a person
types most and expects at once. The help is laid out as click lays out the group's help in
a terminal at least 80 columns wide (or no terminal); narrower terminals, and everything
else, go through click (`tests/unit/test_top_help.py` holds the two to the same text).
"""

from __future__ import annotations

import os

from barca.cli.commands import ABOUT, COMMANDS, EPILOG, OPTIONS

WIDTH = 78  # click's help width: the terminal's, at most 80, less 2


def quick_answer(argv: list[str]) -> str | None:
    """The text `barca ARGV` prints when it is `--help`, `-h`, `--version` or `-V` alone and
    the help fits the width click would use; None for anything else."""
    if argv in (["--version"], ["-V"]):
        from barca import __version__

        return f"barca, version {__version__}"
    if argv in (["--help"], ["-h"]) and _columns() >= WIDTH + 2:
        return top_help()
    return None


def top_help() -> str:
    def rows(pairs: list[tuple[str, str]]) -> list[str]:
        first = max(len(name) for name, _ in pairs)
        return [f"  {name.ljust(first)}  {text}" for name, text in pairs]

    about = ["\n".join(_wrapped(p.split(), WIDTH - 2, "  ")) for p in ABOUT.split("\n\n")]
    examples = ["  " + line for line in EPILOG.removeprefix("\b\n").rstrip("\n").split("\n")]
    lines = ["Usage: barca [OPTIONS] COMMAND [ARGS]...", "", "\n\n".join(about), "",
             "Options:", *rows(OPTIONS), "", "Commands:",
             *rows([(name, text) for name, (_, _, text) in COMMANDS.items()]), "", *examples]
    return "\n".join(lines)


def _wrapped(words: list[str], width: int, indent: str) -> list[str]:
    """Words filled into lines of at most `width` characters (none is longer), each
    indented: textwrap's fill for plain words, without the 20 ms of importing `re`."""
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return [indent + line for line in lines]


def _columns() -> int:
    """The terminal width click would see (shutil's rule: COLUMNS, else the terminal on
    stdout, else 80)."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(1).columns or 80
        except OSError:
            columns = 80
    return columns
