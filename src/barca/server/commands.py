"""The read-only commands the server runs to their end in a child process (`barca status` for
/state, the CLI's views), and the environment every child of the server gets."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Sequence

from barca.engine.driver import start_command


def child_env() -> dict[str, str]:
    """The environment of a command the server runs: its own, without BARCA_SERVER (a
    command told to run on this server would ask this server to run it, again)."""
    env = dict(os.environ)
    for name in ("BARCA_SERVER", "BARCA_SERVER_TOKEN", "BARCA_SERVE_TOKEN"):
        env.pop(name, None)  # and no step sees the server's token
    return env


def run_captured(root: Path, argv: Sequence[str], env: dict[str, str] | None = None) -> dict:
    """Run `barca ARGV` to its end (with `env`, default `child_env()`): {exit_code, stdout,
    stderr} (blocks)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = start_command(root, argv, env or child_env(),
                                    (devnull, out.fileno(), err.fileno()))
        finally:
            os.close(devnull)
        code = process.wait()
        out.seek(0)
        err.seek(0)
        return {"exit_code": code, "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace")}
