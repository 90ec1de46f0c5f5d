"""`barca --help` and `--version` answered without click are the text click gives."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest

from barca import __version__
from barca.cli.app import cli
from barca.cli.top_help import quick_answer


def click_help() -> str:
    return click.Context(cli, info_name="barca", **cli.context_settings).get_help()


@pytest.mark.parametrize("columns", ["80", "100", "250"])
def test_the_quick_help_is_clicks_help_in_a_terminal_80_columns_or_wider(monkeypatch,
                                                                        columns):
    monkeypatch.setenv("COLUMNS", columns)
    assert quick_answer(["--help"]) == quick_answer(["-h"]) == click_help()


def test_a_narrower_terminal_and_every_other_command_line_go_through_click(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    assert quick_answer(["--help"]) is None
    monkeypatch.setenv("COLUMNS", "100")
    for argv in ([], ["--help", "get"], ["get", "--help"], ["help"], ["--version", "x"]):
        assert quick_answer(argv) is None, argv


def test_version_and_help_print_without_importing_click():
    code = ("import sys\nfrom barca.cli.main import main\nmain(sys.argv[1:])\n"
            "print('click' in sys.modules, 'barca.api' in sys.modules)")
    for argv, first in ((["--version"], f"barca, version {__version__}"),
                        (["--help"], "Usage: barca [OPTIONS] COMMAND [ARGS]...")):
        out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True,
                             text=True, timeout=60, env={"COLUMNS": "100", "PATH": ""})
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[0] == first and lines[-1] == "False False"
