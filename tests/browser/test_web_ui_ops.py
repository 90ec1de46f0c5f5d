"""The web UI's operator pages in a real browser over a real `barca serve`: the schedule page
(a job's cron in words, its next fires, pause until resumed or for an hour, resume, fire now
and the outcome of that run), the queue page (the run running, the run waiting while the
queue is paused, pause and resume of the queue, the paused queue's banner on other pages),
and "Recompute" of a partitioned node, which asks for the keys (all, failed, a search) and
starts only from a button saying the count the server's dry run gave.
"""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from conftest import ServeProcess, barca, write
from test_web_ui import node_url

PIPELINE = """
    import time
    from pathlib import Path

    from barca import Schedule, asset, partitions

    RELEASE = Path({release!r})


    @asset(partitions={{"retailer": partitions([f"r{{i:03d}}" for i in range(300)])}})
    def orders(retailer: str) -> dict:
        if retailer in ("r150", "r151"):
            raise ValueError(f"feed {{retailer}} is down")
        return {{"retailer": retailer}}


    @asset(freshness=Schedule("0 6 * * 1-5"))
    def nightly() -> int:
        return 1


    @asset()
    def gate() -> str:
        # runs until the test lets it end (the queue test needs a run that is running)
        while not RELEASE.exists():
            time.sleep(0.05)
        return "released"


    @asset()
    def hello() -> str:
        return "hello"
"""

JOB = "pipeline.py:nightly"


@pytest.fixture(scope="module")
def ops(tmp_path_factory, chromium):
    root = tmp_path_factory.mktemp("ui-ops")
    write(root, {"barca.toml": "", "pipeline.py": PIPELINE.format(release=str(root / "release"))})
    barca(root, "get", "orders", "pipeline.py").expect(1)  # two keys fail
    server = ServeProcess(root, ("pipeline.py",))
    server.root = root
    yield server
    server.stop()


def job(server: ServeProcess) -> dict:
    [found] = [j for j in server.get("/schedule").json() if j["id"] == JOB]
    return found


def test_the_schedule_page_pauses_resumes_and_fires_a_job(ops, page):
    page.goto(f"{ops.url}/ui/#/schedule")
    row = page.locator(f'tr.job-row[data-job="{JOB}"]')
    row.wait_for()
    assert row.locator(".cron-words").text_content() == "at 06:00 on Monday to Friday"

    # its next fires, as the server's scheduler computes them
    row.locator("[data-action=details]").click()
    fires = page.locator(f'tr.job-detail[data-job="{JOB}"] .fire-list li')
    fires.nth(4).wait_for()
    expected = ops.get(f"/schedule/{JOB}/fires").json()["next_fires"]
    assert len(expected) == 5
    assert fires.evaluate_all("ls => ls.map(l => l.dataset.at)") == expected
    assert page.locator(f'tr.job-detail[data-job="{JOB}"] .job-runs').text_content().endswith(
        "No run of this job yet.")

    # pause until resumed: the server keeps it, every next fire shows as skipped
    row.locator("[data-action=pause]").click()
    row.locator('[data-pause="resumed"]').click()
    row.locator("[data-action=resume]").wait_for()
    assert job(ops)["paused"] is True and job(ops)["paused_until"] is None
    page.wait_for_function(f"document.querySelectorAll('tr.job-detail[data-job=\"{JOB}\"] "
                           ".fire-list li.skipped').length === 5")
    row.locator("[data-action=resume]").click()
    row.locator("[data-action=pause]").wait_for()
    assert job(ops)["paused"] is False

    # pause for an hour: until a moment an hour from when it was asked
    asked = datetime.now().timestamp()
    row.locator("[data-action=pause]").click()
    row.locator('[data-pause="1"]').click()
    row.locator("[data-action=resume]").wait_for()
    until = datetime.fromisoformat(job(ops)["paused_until"].replace("Z", "+00:00")).timestamp()
    assert asked + 3600 - 5 <= until <= datetime.now().timestamp() + 3600 + 5
    row.locator("[data-action=resume]").click()
    row.locator("[data-action=pause]").wait_for()

    # fire now: the tick's run starts, is the job's, and its outcome shows on the row
    row.locator("[data-action=fire]").click()
    success = row.locator('.job-outcome[data-status="success"]')
    success.wait_for()
    run_id = success.get_attribute("href").rsplit("/", 1)[1]
    [fired] = ops.get(f"/schedule/{JOB}/fires").json()["runs"]
    assert (fired["run_id"], fired["status"], fired["triggered_by"]) == (run_id, "success", "api")
    assert job(ops)["last_run"] == run_id
    # its cron is unchanged: the next fire is the one it was
    assert ops.get(f"/schedule/{JOB}/fires").json()["next_fires"] == expected


def test_the_queue_page_shows_running_and_waiting_runs_and_pauses_the_queue(ops, page):
    page.goto(f"{ops.url}/ui/#/queue")
    page.locator("[data-action=pause-queue]").wait_for()
    gate = ops.post("/runs", json={"command": "get", "targets": ["gate"]}).json()["run_id"]
    page.locator(f'[data-section=running] .queue-row[data-run="{gate}"]').wait_for()

    page.locator("[data-action=pause-queue]").click()
    page.locator("[data-action=resume-queue]").wait_for()
    assert ops.get("/queue").json()["paused"] is True
    hello = ops.post("/runs", json={"command": "get", "targets": ["hello"]}).json()["run_id"]
    waiting = page.locator(f'[data-section=waiting] .queue-row[data-run="{hello}"]')
    waiting.wait_for()
    assert waiting.locator("td").first.text_content() == "1"  # its place in the queue
    assert "barca get hello" in waiting.text_content()
    assert re.search(r"paused · 1 running · 1 waiting", page.locator("#queue-summary").text_content())

    # another page says the queue is paused, and resumes it
    page.goto(f"{ops.url}/ui/#/runs")
    page.locator("[data-banner=queue-paused]").wait_for()
    page.goto(f"{ops.url}/ui/#/queue")
    page.locator("[data-action=resume-queue]").click()
    page.locator("[data-action=pause-queue]").wait_for()
    assert ops.get("/queue").json()["paused"] is False
    assert ops.wait_ended(hello)["run"]["status"] == "success"
    page.locator(f'.queue-row[data-run="{hello}"]').wait_for(state="detached")

    (ops.root / "release").write_text("")
    assert ops.wait_ended(gate)["run"]["status"] == "success"
    page.locator(f'.queue-row[data-run="{gate}"]').wait_for(state="detached")


def confirm_says(pg, text: str) -> None:
    pg.wait_for_function("t => { const b = document.querySelector('[data-action=confirm-recompute]');"
                         " return b && b.textContent === t && !b.disabled; }", arg=text)


def test_recompute_asks_for_the_keys_and_confirms_their_count(ops, page):
    runs_before = len(ops.runs())
    page.goto(node_url(ops, "pipeline.py:orders"))
    page.locator(".panel-actions .split").click()
    page.locator("[data-action=recompute]").click()
    page.locator(".modal").wait_for()
    confirm_says(page, "Recompute 300 keys")   # all keys, counted by a dry run
    page.check("[data-choice=failed] input")
    confirm_says(page, "Recompute 2 keys")
    page.fill(".modal .search-input", "r01")
    confirm_says(page, "Recompute 10 keys")   # r010 to r019
    assert page.locator("[data-choice=search] .choice-count").text_content() == "10 match"
    page.check("[data-choice=failed] input")
    confirm_says(page, "Recompute 2 keys")
    assert len(ops.runs()) == runs_before  # counting started nothing

    page.locator("[data-action=confirm-recompute]").click()
    page.wait_for_url(re.compile(r"#/runs/\w+$"))
    run_id = page.url.rsplit("/", 1)[1]
    detail = ops.wait_ended(run_id)
    assert detail["run"]["steps_executed"] == 2
    assert sorted(s["step_id"] for s in detail["steps"]) == [
        "pipeline.py:orders[retailer=r150]", "pipeline.py:orders[retailer=r151]"]
    assert page.locator(".modal").count() == 0
