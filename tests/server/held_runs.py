"""One pipeline whose steps wait until the test lets them go, shared by the server tests
of run admission and of the run queue (test_serve_admission.py, test_security_queue.py):
`hold` (a task) and `gate` (a sensor) each mark that they started, then wait for a `go` file;
`fill_slots` starts one held run per slot of the server (one per core)."""

from __future__ import annotations

import os
from pathlib import Path

from conftest import poll

SLOTS = os.cpu_count() or 4  # the server runs this many runs at once

HOLD = """
    import os
    import time
    from pathlib import Path
    from barca import asset, partitions, sensor, task

    def _wait_for_go():
        deadline = time.monotonic() + 60
        while not Path("go").exists() and time.monotonic() < deadline:
            time.sleep(0.02)

    @task()
    def hold() -> None:
        Path(f"started.{os.getpid()}").touch()
        _wait_for_go()

    @task()
    def nap() -> None:
        time.sleep(60)

    @task()
    def mark() -> None:
        with open("marked.log", "a") as fh:
            fh.write("mark\\n")

    @task()
    def drop_me() -> None:
        with open("marked.log", "a") as fh:
            fh.write("drop_me\\n")

    @sensor()
    def gate() -> int:
        Path(f"observing.{os.getpid()}").touch()
        _wait_for_go()
        return 1

    @asset(inputs={"gate": gate})
    def seen(gate: int) -> int:
        return gate

    @asset(partitions={"region": partitions(["a", "b"])})
    def regional(region: str) -> str:
        with open("executed.log", "a") as fh:
            fh.write(region + "\\n")
        return region
"""


def fill_slots(server, project: Path) -> list[str]:
    """Start a held run in each of the server's slots, once all have started; their ids."""
    held = [server.start_run({"command": "run", "targets": ["hold"]}) for _ in range(SLOTS)]
    poll(lambda: len(list(project.glob("started.*"))) == SLOTS, "one run per core to start")
    return held
