"""What the server computes in a child process (`barca.cli.served_run`), given a typed order
(`ServedRun`, never a command line): `/state` (`served_status`), the views that import the
served files (`/list`, `/nodes`) and the read-only commands of `--server` clients (`GET
/cli/{command}`), see `server.views`; and the environment every child of the server gets.

A child writes its answer to the result file its order names; when it fails, its last event
is an `error` event carrying the error's envelope, which is how the server learns why."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import orjson

from barca.engine.driver import start_served_run
from barca.errors import InfraError
from barca.server.run_request import ServedRun


def child_env(read_only: bool = False) -> dict[str, str]:
    """The environment of a child the server starts: its own, without BARCA_SERVER (a
    command told to run on this server would ask this server to run it, again); with
    BARCA_READ_ONLY=1 when `read_only` (a view: SQLite then refuses any write)."""
    env = dict(os.environ)
    for name in ("BARCA_SERVER", "BARCA_SERVER_TOKEN", "BARCA_SERVE_TOKEN"):
        env.pop(name, None)  # and no step sees the server's token
    if read_only:
        env["BARCA_READ_ONLY"] = "1"
    return env


@dataclass(frozen=True)
class ChildAnswer:
    """How a child ended: its exit code, its result file (empty unless it exited 0), the
    envelope of its `error` event (None without one) and what it said on stderr."""

    code: int
    result: bytes
    error: dict[str, Any] | None
    said: list[str]

    def failure(self) -> str:
        """The child's last stderr line, or its exit code: why a child without an error
        event failed."""
        return self.said[-1][:500] if self.said else f"exit {self.code}"


def ask_child(root: Path, kind: str, request: dict[str, Any], files: Sequence[str],
              env: str | None, read_only: bool = False) -> ChildAnswer:
    """Run an order of `kind` in a child process to its end (blocks)."""
    with tempfile.TemporaryDirectory(prefix="barca-child-") as scratch:
        order, result = Path(scratch) / "order", Path(scratch) / "result"
        order.write_bytes(ServedRun(request, tuple(files), env, "", "api", str(result),
                                    kind=kind).to_json())
        stdin = os.open(order, os.O_RDONLY)
        with tempfile.TemporaryFile() as events, tempfile.TemporaryFile() as err:
            try:
                process = start_served_run(root, child_env(read_only),
                                           (stdin, events.fileno(), err.fileno()))
            finally:
                os.close(stdin)
            code = process.wait()
            events.seek(0)
            err.seek(0)
            error = _error_event(events.read())
            said = err.read().decode("utf-8", "replace").strip().splitlines()
        done = code == 0 and result.exists()
        return ChildAnswer(code, result.read_bytes() if done else b"", error, said)


def _error_event(events: bytes) -> dict[str, Any] | None:
    """The envelope of the last `error` event among a child's events, None when none."""
    for line in reversed(events.splitlines()):
        try:
            event = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict) and event.get("type") == "error" and isinstance(
                event.get("error"), dict):
            return event["error"]
    return None


def served_status(root: Path, files: Sequence[str], env: str | None,
                  leave_out: Sequence[str]) -> bytes:
    """`/state`'s nodes as JSON, computed in a child process (it imports the served files to
    evaluate their key expressions); InfraError with the child's last line when it fails."""
    answer = ask_child(root, "status", {"leave_out": list(leave_out)}, files, env)
    if answer.code != 0:
        raise InfraError(f"the status of the served files failed (exit {answer.code}): "
                         f"{answer.said[-1] if answer.said else ''}")
    return answer.result
