"""`barca logs -f --server URL`: follow a run of the server as `barca logs -f` follows one
here: its recorded lines as they come (`GET /runs/{id}/logs`), then the end the run had
(`GET /history/{id}`), with the local command's words and exit codes. The run is the one
RUN_ID names on the server (matched by the server's `barca history`, its errors as they
are), or the server's newest.
"""

from __future__ import annotations

import sys
import time
from types import SimpleNamespace
from typing import Any

import orjson

from barca.cli.logs import (chosen_mode, end_as, followed_bare, line_text, newest_note,
                            no_run_yet)
from barca.cli.output import emit, emit_json
from barca.printable import note, printable
from barca.server_client import answer, error_of
from barca.views.log_lines import match_steps
from barca.views.times import utc_time_of

POLL_SECONDS = 0.5  # two small requests a poll: the server records lines twice a second


def follow_logs(client, params: dict[str, Any]) -> int:
    """Print the run's lines as the server records them; exit as the run ended."""
    mode = chosen_mode(params["json_flag"], params["pretty"], True)
    run_id = _the_run(client, params["run_id"], params["env_name"])
    step, stream, printed = params["step"], params["stream"], 0
    while True:
        run = answer(client.get(f"/history/{run_id}", params={"limit": 1}))["run"]
        query = {"stream": stream} if stream else {}
        lines = answer(client.get(f"/runs/{run_id}/logs", params=query))["logs"]
        new, printed = lines[printed:], len(lines)
        for line in new:
            if step is not None and not match_steps([line["step_id"]], step):
                continue
            if mode == "json":
                emit_json(line)
            else:
                emit(printable(line_text(line["step_id"], line["line"], line["ts"],
                                         followed_bare(step, line["step_id"]),
                                         params["timestamps"])))
        if run["status"] != "running":
            break
        time.sleep(POLL_SECONDS)
    end_as(SimpleNamespace(**run))
    return 0


def _the_run(client, text: str | None, env_name: str | None) -> str:
    """The full id of the run to follow: RUN_ID as the server's `barca history` matches it
    (its error, and exit code, when it does not), or the newest run with a note."""
    args = ["--json", "--limit=1", *(["--", text] if text is not None else [])]
    body = answer(client.get("/cli/history", params=[("arg", a) for a in args]))
    if body["exit_code"] != 0:  # the server's command refused it: its error, said here
        said = [line for line in body["stderr"].splitlines() if line.startswith("{")]
        if not said:
            sys.stderr.write(body["stderr"])
            raise SystemExit(body["exit_code"])
        raise error_of(orjson.loads(said[-1]), body["exit_code"])
    out = orjson.loads(body["stdout"])
    if text is not None:
        return out["run"]["run_id"]
    if not out["runs"]:
        raise no_run_yet(env_name)
    run = out["runs"][0]
    note(newest_note(run["run_id"], run["command"], run["target"], run["status"],
                     utc_time_of(run["started_at"])))
    return run["run_id"]

