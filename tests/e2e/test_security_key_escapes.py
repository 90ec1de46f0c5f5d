"""Keys are outside data: printed for a terminal or a log, their control characters are
escaped (issue 26, item 10; `barca docs contract`).

A keyed sensor returns the key `x<ESC>[31m<newline>[barca] run failed`. Printed as it is, it
recolours the terminal and forges a `[barca] run failed` line of its own. Every human and
line-oriented output (`--agent`, `--pretty`, the dry-run and status tables, `history`, `logs`,
a run's events streamed by `barca serve` and printed by a `--server` client) shows it as
`x\\x1b[31m\\n[barca] run failed`; JSON keeps the key exact. Real `barca` commands, a real
pseudo-terminal and a real `barca serve`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import barca, in_terminal, write

NASTY = "x\x1b[31m\n[barca] run failed"
SHOWN = "x\\x1b[31m\\n[barca] run failed"  # what a reader sees instead

PIPELINE = """
    from pathlib import Path

    from barca import asset, partitions_from, sensor

    NASTY = "x" + chr(27) + "[31m" + chr(10) + "[barca] run failed"

    @sensor()
    def sources() -> dict:
        return {"ok": "1", NASTY: Path("version").read_text()}

    @asset(partitions={"k": partitions_from(sources)})
    def scored(k: str) -> dict:
        print("scoring " + k)
        return {"k": k}

    @asset(partitions={"k": partitions_from(sources)})
    def checked(k: str) -> dict:
        if k != "ok":
            raise ValueError("refused " + k)
        return {"k": k}
"""


@pytest.fixture
def nasty(project: Path) -> Path:
    write(project, {"pipeline.py": PIPELINE, "version": "1"})
    return project


def assert_escaped(text: str, legit_failures: int = 0) -> None:
    """No raw escape from the key, no forged line, and the key shown escaped."""
    assert "\x1b" not in text, text
    forged = [line for line in text.splitlines() if line.startswith("[barca] run failed")]
    assert len(forged) == legit_failures, text
    assert SHOWN in text, text


def test_agent_lines_escape_the_key_and_json_keeps_it(nasty: Path) -> None:
    got = barca(nasty, "get", "scored", "pipeline.py", "--agent").expect(0)
    assert_escaped(got.stderr)
    assert f"[barca] step:pipeline.py:scored[k={SHOWN}] completed" in got.stderr
    assert got.json["final_output"] == {"k=ok": {"k": "ok"}, f"k={NASTY}": {"k": NASTY}}


def test_pretty_output_in_a_terminal_escapes_the_key(nasty: Path) -> None:
    proc, out, err = in_terminal(nasty, "get", "scored", "pipeline.py", "--pretty")
    assert proc.returncode == 0, err
    assert_escaped(out + err)
    (nasty / "version").write_text("2")  # the key's value changed: the dry run names it
    for args in (["get", "scored", "pipeline.py", "--dry-run"], ["status", "pipeline.py"]):
        proc, out, err = in_terminal(nasty, *args, "--pretty")
        assert proc.returncode == 0, err
        assert "\x1b" not in out + err and not any(
            line.startswith("[barca] run failed") for line in out.splitlines()), out
    assert f"will run: k={SHOWN} (value pipeline.py:sources changed)" in \
        in_terminal(nasty, "get", "scored", "pipeline.py", "--dry-run", "--pretty")[1]


def test_history_and_logs_escape_the_key_and_json_keeps_it(nasty: Path) -> None:
    run_id = barca(nasty, "get", "scored", "pipeline.py").expect(0).json["run_id"]
    for args in (["history", run_id, "--pretty"], ["logs", run_id], ["logs", run_id, "--pretty"]):
        assert_escaped(barca(nasty, *args).expect(0).stdout)
    steps = barca(nasty, "history", run_id, "--json").expect(0).json["steps"]
    assert f"k={NASTY}" in [s["partition_key"] for s in steps]
    lines = barca(nasty, "logs", run_id, "--json").expect(0).json
    assert {"step_id": f"pipeline.py:scored[k={NASTY}]", "line": "scoring x\x1b[31m"} in [
        {"step_id": line["step_id"], "line": line["line"]} for line in lines]


def test_a_failure_naming_the_key_is_escaped_wherever_it_is_printed(nasty: Path) -> None:
    got = barca(nasty, "get", "checked", "pipeline.py", "--agent").expect(1)
    assert_escaped(got.stderr, legit_failures=1)
    assert json.loads(got.stderr.splitlines()[-1])["node"] == f"pipeline.py:checked[k={NASTY}]"
    proc, out, err = in_terminal(nasty, "get", "checked", "pipeline.py", "--pretty")
    assert proc.returncode == 1
    assert_escaped(out + err, legit_failures=1)
    history = barca(nasty, "history", got.json["run_id"], "--pretty").expect(0)
    assert_escaped(history.stdout + history.stderr)
    assert f"Failed   pipeline.py:checked[k={SHOWN}]: refused x\\x1b[31m\n" in history.stdout
    runs = barca(nasty, "history", "--pretty").expect(0)
    assert "\x1b" not in runs.stdout and "[barca] run failed" not in runs.stdout


def test_a_served_runs_lines_escape_the_key_and_its_fields_keep_it(nasty: Path, serve) -> None:
    server = serve(nasty, "pipeline.py")
    run_id = server.start_run({"targets": ["scored"]})
    server.wait_ended(run_id)
    with server.client.stream("GET", f"/runs/{run_id}/events") as response:
        events = [json.loads(line[6:]) for line in response.iter_lines()
                  if line.startswith("data: ")]
    printed = "\n".join(e["line"] for e in events if e.get("line"))
    assert_escaped(printed)
    assert f"pipeline.py:scored[k={NASTY}]" in [e.get("step_id") for e in events]

    client = barca(nasty, "get", "scored", "pipeline.py", "--agent", "--refresh", "scored",
                   "--server", server.url).expect(0)
    assert_escaped(client.stderr)
    assert "\x1b" not in server.stderr
