"""What the server computes to its end in a child process: `/state` (`served_status`, through
the views) and the CLI's read-only commands for `--server` clients (`run_captured`); and the
environment every child of the server gets."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Sequence

from barca.engine.driver import start_command, start_served_run
from barca.errors import InfraError
from barca.server.run_request import ServedRun


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


def served_status(root: Path, files: Sequence[str], env: str | None,
                  leave_out: Sequence[str]) -> bytes:
    """`/state`'s nodes as JSON, computed in a child process (it imports the served files to
    evaluate their key expressions); InfraError with the child's last line when it fails."""
    with tempfile.TemporaryDirectory(prefix="barca-state-") as scratch:
        order, result = Path(scratch) / "order", Path(scratch) / "result"
        order.write_bytes(ServedRun({"leave_out": list(leave_out)}, tuple(files), env, "",
                                    "api", str(result), kind="status").to_json())
        stdin, devnull = os.open(order, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY)
        with tempfile.TemporaryFile() as err:
            try:
                process = start_served_run(root, child_env(), (stdin, devnull, err.fileno()))
            finally:
                os.close(stdin)
                os.close(devnull)
            code = process.wait()
            err.seek(0)
            said = err.read().decode("utf-8", "replace").strip().splitlines()
        if code != 0:
            raise InfraError(f"the status of the served files failed (exit {code}): "
                             f"{said[-1] if said else ''}")
        return result.read_bytes()
