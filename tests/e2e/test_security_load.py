"""issue 26, item 12 on the real CLI: a task parameter that nothing supplies is a load error
(exit 2) naming it and the fix, not a TypeError at run time; and what a step prints is stored
capped (a line's length, a step's line count), the log saying what was not kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from barca.engine.log_cap import MAX_LINE_CHARS, MAX_LINES
from conftest import barca, write


def test_a_task_parameter_missing_from_inputs_is_a_load_error_naming_it(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset, task

        @asset()
        def summary() -> int:
            open("summary-ran", "w").close()
            return 1

        @task(inputs={"summary": summary})
        def publish(summary: int, channel: str) -> str:
            open("publish-ran", "w").close()
            return channel
    """})
    for args in (["run", "publish", "p.py"], ["list", "p.py"], ["get", "summary", "p.py"]):
        result = barca(project, *args).expect(2)
        envelope = result.envelope
        assert envelope["kind"] == "usage", envelope
        assert "p.py:publish (line 9)" in envelope["error"], envelope
        assert "parameter 'channel' of publish has no default and nothing supplies it" \
            in envelope["error"], envelope
        assert 'inputs={"channel": upstream}' in envelope["remediation"], envelope
        assert "Traceback" not in result.stderr
    assert not list(project.glob("*-ran"))  # nothing ran
    assert not (project / ".barca").exists()


def test_what_supplies_a_task_parameter_still_loads_and_runs(project: Path) -> None:
    """A default, a partition dimension, a `_`-named ordering input, and a task that another
    step calls as a parallel() branch (the call passes its arguments, as the published barca
    lets every task be called)."""
    write(project, {"p.py": """
        import functools

        from barca import asset, parallel, partitions, task

        @asset()
        def summary() -> int:
            return 2

        @task(inputs={"_after": summary}, partitions={"region": partitions(["emea", "amer"])})
        def announce(region: str, _after, channel: str = "mail") -> str:
            return f"{region} by {channel}, after {_after}"

        @task()
        def fetch(region: str) -> str:
            return region.upper()

        @task(inputs={"summary": summary})
        def fan_out(summary: int) -> list:
            return parallel(*[functools.partial(fetch, r) for r in ["emea"] * summary])
    """})
    announced = barca(project, "run", "announce", "p.py").expect(0).json
    assert announced["final_output"] == {"region=emea": "emea by mail, after None",
                                         "region=amer": "amer by mail, after None"}, announced
    assert barca(project, "run", "fan_out", "p.py").expect(0).json["final_output"] == [
        "EMEA", "EMEA"]


def test_a_steps_stored_log_is_capped_and_says_what_it_left_out(project: Path) -> None:
    write(project, {"p.py": f"""
        from barca import asset

        @asset()
        def loud() -> int:
            print("first")
            print("x" * 20_000_000)
            for i in range({MAX_LINES} + 500):
                print("line", i)
            return 1

        @asset()
        def quiet() -> int:
            print("just one")
            return 2
    """})
    run_id = barca(project, "get", "p.py", env={"BARCA_POOL_SIZE": "1"}).expect(0).json["run_id"]
    db = project / ".barca" / "metadata.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT step_id, line FROM logs WHERE run_id = ? ORDER BY seq",
                            (run_id,)).fetchall()
        stored = conn.execute("SELECT sum(length(line)) FROM logs").fetchone()[0]
    finally:
        conn.close()
    loud = [line for step, line in rows if step == "p.py:loud"]
    assert [line for step, line in rows if step == "p.py:quiet"] == ["just one"]
    assert loud[0] == "first"
    assert loud[1] == "x" * MAX_LINE_CHARS + (
        f" [barca] line cut: {20_000_000 - MAX_LINE_CHARS:,} more characters not kept "
        f"(a stored line keeps {MAX_LINE_CHARS:,})")
    assert loud[2:MAX_LINES] == [f"line {i}" for i in range(MAX_LINES - 2)]
    assert len(loud) == MAX_LINES + 2
    assert loud[MAX_LINES] == (f"[barca] log limit: this step printed more than {MAX_LINES:,} "
                               "lines; the later ones are not kept")
    dropped = 502  # the 10,000 + 500 counted lines and two more, less the 9,998 kept
    chars = sum(len(f"line {i}") for i in range(MAX_LINES - 2, MAX_LINES + 500))
    assert loud[-1] == (f"[barca] log limit: {dropped:,} more lines ({chars:,} characters) of "
                        "this step's output were not kept")
    assert stored < 1_000_000  # not the 20 MB line

    shown = barca(project, "logs", run_id, "--step", "loud").expect(0).stdout.splitlines()
    assert shown == loud
