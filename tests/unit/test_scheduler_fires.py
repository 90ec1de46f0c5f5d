"""Which runs `barca serve`'s scheduler starts when its jobs fire, tested on data: jobs read
from a real pipeline file (`scheduled_jobs` over the discovered graph), a clock the test sets,
the real schedule_state table in SQLite, and the scheduler's own `_fire` and `run` loop; what
it asks of the server's runs is recorded instead of started (`Asked` below). No server and no
wait for a real cron: tests/server/test_serve_schedule.py keeps a scheduled keyed tick and a
restart's catch-up end to end. (Which jobs share a run, on literal graphs:
tests/unit/test_run_sharing.py; what fires when: tests/unit/test_scheduler.py.)"""

from __future__ import annotations

import asyncio
import threading
import textwrap
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

from barca.engine.driver import open_pipeline
from barca.server.run_request import RunRequest
from barca.server.scheduler import Scheduler, scheduled_jobs
from barca.store.db import connect
from barca.store.schedule_state import Fired, load, record

EVERY_SECOND = "*/1 * * * * *"
NOON = datetime(2026, 3, 1, 12, tzinfo=timezone.utc).timestamp()


def run_alone(coroutine) -> None:
    """`asyncio.run` in a thread of its own, as the server runs its scheduler's loop: a test
    that ran before in this process may have left an event loop running on this thread."""
    failed: list[BaseException] = []

    def main() -> None:
        try:
            asyncio.run(coroutine)
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            failed.append(exc)

    thread = threading.Thread(target=main)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "the scheduler's loop did not end within 60 s"
    if failed:
        raise failed[0]


class Clock:
    """The time the scheduler reads: set by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Started:
    run_id: str
    request: RunRequest
    triggered_by: str
    live: bool = True  # pending or running, as server.live_run.LiveRun.live

    ended = None  # the scheduler waits on it to count failed ticks

    @property
    def status(self) -> str:
        return "running" if self.live else "complete"

    async def wait(self, flag) -> None:
        """Never returns: these runs end between two loops of the scheduler, which counts
        no tick here (the failed ticks are counted end to end: test_serve_schedule_failures)."""
        await asyncio.Event().wait()


class Asked:
    """What the scheduler uses of the server's runs (server.runs.Runs): `start` a run for a
    request, `get` a run it started (is it still live?). Each request is recorded with a run
    id instead of a process: the subject here is which runs the scheduler asks for, when;
    starting them is the server's (tests/server/)."""

    def __init__(self) -> None:
        self.started: list[Started] = []
        self.loop: asyncio.AbstractEventLoop | None = None  # Scheduler.stop() wakes it on it
        self.on_start = lambda run: None

    async def start(self, request: RunRequest, triggered_by: str = "api",
                    time_limit: float | None = None, limit_by: str | None = None) -> Started:
        run = Started(f"run{len(self.started) + 1}", request, triggered_by)
        self.started.append(run)
        self.on_start(run)
        return run

    def get(self, run_id: str) -> Started | None:
        return next((r for r in self.started if r.run_id == run_id), None)

    def asked(self) -> list[tuple[str, tuple[str, ...], str | None]]:
        return [(r.request.command, r.request.targets, r.request.schedule_id)
                for r in self.started]


def jobs_of(root: Path, source: str):
    (root / "barca.toml").write_text("")
    (root / "p.py").write_text(textwrap.dedent(source))
    return scheduled_jobs(open_pipeline(["p.py"], cwd=root).graph)


def scheduler(jobs, runs: Asked, clock: Clock, root: Path) -> Scheduler:
    return Scheduler(jobs, runs, root / "metadata.db", zone=timezone.utc, zone_name="utc",
                     clock=clock)


def tick(s: Scheduler, runs_end: bool = True) -> None:
    """A second passes (the runs started so far end in it, unless `runs_end` is False); the
    scheduler fires what is due then, as its loop does."""
    s.clock.now += 1.0
    for run in s.runs.started if runs_end else ():
        run.live = False

    async def fire() -> None:
        for at, jobs in s.due(s.clock.now):
            await s._fire(jobs, at, "schedule")

    run_alone(fire())


def said(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("[barca]")]


def fires(root: Path) -> dict[str, Fired]:
    conn = connect(root / "metadata.db", create=True)
    try:
        return load(conn)
    finally:
        conn.close()


def test_two_scheduled_readers_of_one_upstream_due_together_share_one_run(
        tmp_path: Path, capsys) -> None:
    jobs = jobs_of(tmp_path, f"""
        from barca import Schedule, asset

        @asset()
        def base() -> int:
            return 1

        @asset(inputs={{"base": base}}, freshness=Schedule("{EVERY_SECOND}"))
        def alpha(base: int) -> int:
            return base

        @asset(inputs={{"base": base}}, freshness=Schedule("{EVERY_SECOND}"))
        def beta(base: int) -> int:
            return base + 1
    """)
    runs, clock = Asked(), Clock(NOON)
    s = scheduler(jobs, runs, clock, tmp_path)
    assert s.load_state() == []  # jobs never seen: anchored at now, nothing fires
    tick(s)
    tick(s)
    assert runs.asked() == [("get", ("p.py:alpha", "p.py:beta"), "p.py:alpha,p.py:beta")] * 2
    assert [r.request.scheduled_at for r in runs.started] == [NOON + 1, NOON + 2]
    assert all(r.triggered_by == "schedule" and r.request.value is False
               for r in runs.started)  # a tick reads no value
    assert said(capsys) == ["[barca] scheduled run p.py:alpha, p.py:beta → run1",
                            "[barca] scheduled run p.py:alpha, p.py:beta → run2"]
    assert fires(tmp_path) == {job: Fired(EVERY_SECOND, "utc", NOON + 2, "run2")
                               for job in ("p.py:alpha", "p.py:beta")}
    assert {j["id"]: (j["last_run"], j["last_status"]) for j in s.describe()} == {
        "p.py:alpha": ("run2", "running"), "p.py:beta": ("run2", "running")}  # `/schedule`


def test_an_asset_and_a_task_due_together_share_one_run_of_command_serve(
        tmp_path: Path, capsys) -> None:
    jobs = jobs_of(tmp_path, f"""
        from barca import Schedule, asset, task

        @asset(freshness=Schedule("{EVERY_SECOND}"))
        def alpha() -> int:
            return 1

        @task(inputs={{"alpha": alpha}}, freshness=Schedule("{EVERY_SECOND}"))
        def notify(alpha: int) -> None:
            print("notified", alpha)
    """)
    runs, clock = Asked(), Clock(NOON)
    s = scheduler(jobs, runs, clock, tmp_path)
    s.load_state()
    tick(s)
    assert runs.asked() == [("serve", ("p.py:alpha", "p.py:notify"), "p.py:alpha,p.py:notify")]
    assert said(capsys) == ["[barca] scheduled run p.py:alpha, p.py:notify → run1"]


def test_jobs_due_together_run_apart_when_sharing_would_delay_one_said_once(
        tmp_path: Path, capsys) -> None:
    jobs = jobs_of(tmp_path, f"""
        from barca import Schedule, asset

        @asset()
        def base() -> int:
            return 1

        @asset(inputs={{"base": base}})
        def middle(base: int) -> int:
            return base

        @asset(inputs={{"base": base}}, freshness=Schedule("{EVERY_SECOND}"))
        def near(base: int) -> int:
            return base

        @asset(inputs={{"middle": middle}}, freshness=Schedule("{EVERY_SECOND}"))
        def far(middle: int) -> int:
            return middle

        @asset(freshness=Schedule("{EVERY_SECOND}"))
        def alone() -> int:
            return 3
    """)
    runs, clock = Asked(), Clock(NOON)
    s = scheduler(jobs, runs, clock, tmp_path)
    s.load_state()
    tick(s)
    tick(s)
    assert sorted(target for _, targets, _ in runs.asked() for target in targets) == sorted(
        ["p.py:near", "p.py:far", "p.py:alone"] * 2)
    assert all(len(targets) == 1 for _, targets, _ in runs.asked())  # each on its own
    lines = said(capsys)
    apart = [line for line in lines if "runs apart" in line]
    # far, two levels below base, would wait behind near's level: said once, not per fire
    assert len(apart) == 1, lines
    assert apart[0].endswith("runs apart from the jobs due with it: in one run p.py:far "
                             "would wait for p.py:near, which it does not read")
    assert sum("scheduled run p.py:far →" in line for line in lines) == 2
    assert not any("p.py:alone runs apart" in line for line in lines)  # nothing in common


def test_a_job_never_overlaps_itself_a_fire_in_flight_is_skipped(tmp_path: Path,
                                                                 capsys) -> None:
    jobs = jobs_of(tmp_path, f"""
        from barca import Schedule, task

        @task(freshness=Schedule("{EVERY_SECOND}"))
        def nap() -> None:
            pass
    """)
    runs, clock = Asked(), Clock(NOON)
    s = scheduler(jobs, runs, clock, tmp_path)
    s.load_state()
    tick(s)
    assert runs.asked() == [("run", ("p.py:nap",), "p.py:nap")]
    tick(s, runs_end=False)  # run1 still in flight: this fire is skipped, and said
    tick(s, runs_end=False)
    assert len(runs.started) == 1
    tick(s)  # run1 ended: the next fire starts a run
    assert [r.run_id for r in runs.started] == ["run1", "run2"]
    assert said(capsys) == [
        "[barca] scheduled run p.py:nap → run1",
        "[barca] scheduled run p.py:nap skipped — previous run run1 still in flight",
        "[barca] scheduled run p.py:nap skipped — previous run run1 still in flight",
        "[barca] scheduled run p.py:nap → run2"]
    # a skipped fire is not recorded as a fire: the job's last run is the one it started
    assert fires(tmp_path)["p.py:nap"] == Fired(EVERY_SECOND, "utc", NOON + 4, "run2")


def test_a_scheduled_sensor_ticks_itself_and_the_always_assets_that_read_it(
        tmp_path: Path) -> None:
    jobs = jobs_of(tmp_path, f"""
        from barca import Manual, Schedule, asset, partitions_from, sensor

        @sensor(freshness=Schedule("{EVERY_SECOND}"))
        def versions() -> dict:
            return {{"k": 1}}

        @asset(partitions={{"k": partitions_from(versions)}})
        def cleaned(k: str, versions: int) -> int:
            return versions

        @asset(partitions={{"k": partitions_from(cleaned)}})
        def scored(k: str, cleaned: int) -> int:
            return cleaned

        @asset(inputs={{"v": versions}}, freshness=Manual)
        def pinned(v: dict) -> int:
            return 1
    """)
    runs, clock = Asked(), Clock(NOON)
    s = scheduler(jobs, runs, clock, tmp_path)
    s.load_state()
    tick(s)
    assert runs.asked() == [("get", ("p.py:versions", "p.py:cleaned", "p.py:scored"),
                             "p.py:versions")]


@pytest.mark.parametrize("missed", [1, 3])
def test_the_loop_starts_one_catch_up_run_for_fires_missed_while_stopped(
        tmp_path: Path, capsys, missed: int) -> None:
    """`run()`: a job whose next fire passed while no server ran fires once at start, as
    `catch_up`, however many fires it missed; a job never seen does not fire."""
    jobs = jobs_of(tmp_path, """
        from barca import Schedule, asset

        @asset(freshness=Schedule("0 * * * *"))
        def hourly() -> int:
            return 1

        @asset(freshness=Schedule("0 * * * *"))
        def newcomer() -> int:
            return 2
    """)
    conn = connect(tmp_path / "metadata.db", create=True)
    record(conn, [("p.py:hourly", Fired("0 * * * *", "utc", NOON - missed * 3600, "old"))])
    conn.close()
    runs, clock = Asked(), Clock(NOON + 600)
    s = scheduler(jobs, runs, clock, tmp_path)

    async def until_the_first_run() -> None:
        runs.loop = asyncio.get_running_loop()
        runs.on_start = lambda run: s.stop()  # the loop goes on to wait; stop wakes it
        await asyncio.wait_for(s.run(s.load_state()), 10)

    run_alone(until_the_first_run())
    assert runs.asked() == [("get", ("p.py:hourly",), "p.py:hourly")]
    assert [(r.triggered_by, r.request.scheduled_at) for r in runs.started] == [
        ("catch_up", NOON + 600)]
    assert said(capsys) == ["[barca] catch-up run p.py:hourly → run1"]
    assert fires(tmp_path) == {
        "p.py:hourly": Fired("0 * * * *", "utc", NOON + 600, "run1"),
        "p.py:newcomer": Fired("0 * * * *", "utc", NOON + 600, None)}
