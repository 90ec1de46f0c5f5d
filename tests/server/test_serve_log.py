"""What `barca serve` logs when a run ends (a real server on loopback): a failed run names the
step that failed, its key and the first line of its error; any other run gets one line of
counts."""

from __future__ import annotations

from pathlib import Path

from conftest import poll, write

PIPELINE = """
    from barca import asset, partitions

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def keyed(k: str) -> int:
        if k != "a":
            raise ValueError(f"{k} is bad\\nmore detail")
        return 1

    @asset()
    def plain() -> int:
        return 1
"""


def test_the_serve_log_says_how_each_run_ended(project: Path, serve) -> None:
    write(project, {"p.py": PIPELINE})
    server = serve(project, "p.py", "--no-schedule")
    failed = server.start_run({"targets": ["keyed"]})
    server.wait_status(failed)
    said = poll(lambda: next((line for line in server.lines
                              if line.startswith(f"[barca] run {failed} ")), None),
                "the failed run's line")
    assert said in (f"[barca] run {failed} failed — get keyed (api): step p.py:keyed, key k={k} "
                    f"failed: ValueError: {k} is bad (and 1 more failed step)" for k in "bc"), said

    done = server.start_run({"targets": ["plain"]})
    server.wait_status(done)
    poll(lambda: f"[barca] run {done} complete — get plain (api): 1 of 1 step ran, 0 cached, "
         in server.stderr, "the complete run's line")
    again = server.start_run({"targets": ["plain"]})
    server.wait_status(again)
    poll(lambda: f"[barca] run {again} complete — get plain (api): 0 of 1 step ran, 1 cached"
         in server.stderr, "the cached run's line")
