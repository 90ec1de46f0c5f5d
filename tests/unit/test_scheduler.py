"""What `barca serve`'s scheduler fires when, tested on data: a clock the test sets, real
jobs and the real schedule_state table in SQLite, no server and no wait for a real cron
(tests/server/test_serve_schedule.py runs real crons end to end)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType

from barca.server.scheduler import Job, Scheduler
from barca.store.db import connect
from barca.store.schedule_state import Fired, load, record

EVERY_SECOND = "*/1 * * * * *"
HOURLY = "0 * * * *"
# 2026-03-01 12:00:00 UTC: on the hour, and on a whole second
NOON = datetime(2026, 3, 1, 12, tzinfo=timezone.utc).timestamp()


class Clock:
    """The time the scheduler reads: set by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def job(name: str, cron: str) -> Job:
    node = f"p.py:{name}"
    return Job(node, cron, "asset", (), (node,), MappingProxyType({node: 0}))


def scheduler(jobs: list[Job], clock: Clock, db: Path | None = None) -> Scheduler:
    return Scheduler(jobs, runs=None, db_path=db, zone=timezone.utc, zone_name="utc",
                     clock=clock)


def fired(due: list[tuple[float, list[Job]]]) -> list[tuple[float, list[str]]]:
    return [(at - NOON, [j.id for j in jobs]) for at, jobs in due]


def test_an_every_second_job_fires_on_each_second_and_not_between() -> None:
    clock = Clock(NOON)
    s = scheduler([job("tick", EVERY_SECOND)], clock)
    s.anchor["p.py:tick"] = NOON
    assert s.due(NOON + 0.5) == []
    assert fired(s.due(NOON + 1.0)) == [(1.0, ["p.py:tick"])]
    assert s.anchor["p.py:tick"] == NOON + 1  # anchored at its fire, not at the clock
    assert s.due(NOON + 1.9) == []
    assert fired(s.due(NOON + 2.2)) == [(2.0, ["p.py:tick"])]


def test_jobs_due_at_one_instant_come_together_and_instants_in_order() -> None:
    clock = Clock(NOON)
    s = scheduler([job("a", EVERY_SECOND), job("b", EVERY_SECOND), job("h", HOURLY)], clock)
    s.anchor.update({"p.py:a": NOON - 1, "p.py:b": NOON - 1, "p.py:h": NOON - 3600})
    # a and b were due at NOON (one group: what lets them share one run); h at NOON too
    assert fired(s.due(NOON)) == [(0.0, ["p.py:a", "p.py:b", "p.py:h"])]
    s.anchor["p.py:h"] = NOON - 1800  # next hourly fire: NOON; the seconds' next: NOON + 1
    assert fired(s.due(NOON + 1)) == [(0.0, ["p.py:h"]), (1.0, ["p.py:a", "p.py:b"])]


def test_a_job_far_behind_fires_once_then_keeps_to_its_cron() -> None:
    clock = Clock(NOON)
    s = scheduler([job("h", HOURLY)], clock)
    s.anchor["p.py:h"] = NOON - 5 * 3600 - 60  # a machine suspended for five hours
    now = NOON + 600
    assert fired(s.due(now)) == [(-5 * 3600.0, ["p.py:h"])]  # the first missed fire, once
    assert s.anchor["p.py:h"] == now  # anchored at now: the others are not replayed
    assert s.due(now + 1) == []
    assert s.next_fire(s.jobs[0]) == NOON + 3600


def test_a_restart_catches_up_a_missed_fire_once_and_anchors_a_new_job_at_now(
        tmp_path: Path) -> None:
    db = tmp_path / "metadata.db"
    clock = Clock(NOON + 600)
    conn = connect(db, create=True)
    record(conn, [("p.py:seen", Fired(HOURLY, "utc", NOON - 3 * 3600, "r-old")),
                  ("p.py:recron", Fired("30 * * * *", "utc", NOON - 3 * 3600, None))])
    conn.close()
    jobs = [job("seen", HOURLY), job("recron", HOURLY), job("new", HOURLY)]
    s = scheduler(jobs, clock, db)
    missed = s.load_state()
    assert [j.id for j in missed] == ["p.py:seen"]  # one catch-up, however many it missed
    assert s.anchor == {"p.py:seen": NOON - 3 * 3600, "p.py:recron": clock.now,
                        "p.py:new": clock.now}
    assert s.last_run == {"p.py:seen": "r-old"}
    conn = connect(db, create=True)
    rows = load(conn)
    conn.close()
    # a job never seen, or whose cron changed, is recorded as seen now and not fired
    assert rows["p.py:new"] == Fired(HOURLY, "utc", clock.now, None)
    assert rows["p.py:recron"] == Fired(HOURLY, "utc", clock.now, None)
    assert rows["p.py:seen"] == Fired(HOURLY, "utc", NOON - 3 * 3600, "r-old")


def test_a_job_never_seen_does_not_fire_until_its_next_instant(tmp_path: Path) -> None:
    clock = Clock(NOON + 10)
    s = scheduler([job("new", EVERY_SECOND)], clock, tmp_path / "metadata.db")
    assert s.load_state() == []
    assert s.due(clock.now + 0.5) == []
    assert fired(s.due(NOON + 11)) == [(11.0, ["p.py:new"])]
