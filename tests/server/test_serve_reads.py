"""The read routes that need only the metadata database and the served graph (`/history`,
`/history/{run_id}`, `/stats/{name}`) are answered by the server itself, from barca.views,
without a child process: they answer even while every slot for the server's child processes
is taken (a real `barca serve` on loopback, its children held by the pipeline's own key
expression)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from barca.server.blocking import COMMAND_THREADS, COMMANDS_WAITING
from conftest import barca, lines, poll, write

# `status` imports the pipeline to evaluate `partitions(regions())`: while `hold` exists, a
# child computing it waits there
PIPELINE = """
    import os
    import time
    from barca import asset, partitions

    def regions() -> list[str]:
        with open("evaluating.log", "a") as f:
            f.write(f"{os.getpid()}\\n")
        while os.path.exists("hold"):
            time.sleep(0.05)
        return ["emea", "amer"]

    @asset(partitions={"region": partitions(regions())})
    def per_region(region: str) -> str:
        return region
"""


def test_history_and_stats_answer_while_every_child_slot_is_taken(project: Path,
                                                                  serve) -> None:
    write(project, {"p.py": PIPELINE})
    run_id = barca(project, "get", "per_region", "p.py").expect(0).json["run_id"]
    server = serve(project, "p.py", "--no-schedule")
    (project / "evaluating.log").unlink()  # the run's and the server's own load's
    (project / "hold").touch()
    slots = COMMAND_THREADS + COMMANDS_WAITING
    with ThreadPoolExecutor(slots + 2) as pool:
        try:
            views = [pool.submit(lambda: server.get("/nodes").status_code)
                     for _ in range(slots + 2)]
            # the views past the bound are refused at once: every slot is taken, and
            # the children holding the first ones wait in `regions()`
            poll(lambda: any(v.done() and v.result() == 503 for v in views),
                 "a view refused because the server is busy")
            poll(lambda: len(lines(project / "evaluating.log")) >= COMMAND_THREADS,
                 "the children to evaluate the key expression")

            history = server.get("/history")
            assert history.status_code == 200, history.text
            assert [r["run_id"] for r in history.json()["runs"]] == [run_id]
            one = server.get(f"/history/{run_id[:6]}")
            assert one.status_code == 200, one.text
            assert {s["partition_key"] for s in one.json()["steps"]} == {"region=emea",
                                                                        "region=amer"}
            stats = server.get("/stats/per_region")
            assert stats.status_code == 200, stats.text
            assert stats.json()["total_runs"] == 2
            assert len(lines(project / "evaluating.log")) == COMMAND_THREADS  # still held
        finally:
            (project / "hold").unlink()
        answers = sorted(v.result() for v in views)
    assert answers == [200] * slots + [503] * 2
