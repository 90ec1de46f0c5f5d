"""The web UI on a 300-key node with one failed key, in a real browser over a real `barca
serve`: shares that never round a failure away (299 of 300 is 99.7%), "1 key", reason codes
in words, barca's own version, the failed key's error in the asset list; a key's page with
its value (JSON pretty, a table's first rows) and its attempts, each linked to its run, the
failed one with the user's frames of its traceback; a failed run's page with that traceback
and its steps linked to their keys' pages; and the address `barca serve` prints for the UI.
"""

from __future__ import annotations

import re

import pytest

from barca import __version__
from conftest import ServeProcess, barca, write
from test_web_ui import node_url

PIPELINE = """
    from barca import asset, partitions


    def check(r):
        if r == "r150":
            raise ValueError(f"feed {r} is down")
        return {"retailer": r, "rows": [1, 2, 3]}


    @asset(partitions={"retailer": partitions([f"r{i:03d}" for i in range(300)])})
    def orders(retailer: str) -> dict:
        return check(retailer)


    @asset(partitions={"day": partitions(["d1"])})
    def daily(day: str) -> str:
        return day


    @asset()
    def table():
        import pyarrow as pa
        return pa.table({"a": list(range(50)), "b": [f"x{i}" for i in range(50)]})
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory, chromium):
    root = tmp_path_factory.mktemp("ui-keys")
    write(root, {"barca.toml": "", "pipeline.py": PIPELINE})
    barca(root, "get", "orders,daily,table", "pipeline.py").expect(1)
    server = ServeProcess(root, ("pipeline.py",))
    yield server
    server.stop()


def failed_run(server: ServeProcess) -> str:
    [run] = [r for r in server.runs() if r["status"] == "failed"]
    return run["run_id"]


def test_shares_counts_reasons_and_version(small, page):
    page.goto(node_url(small, "pipeline.py:orders"))
    cached = page.locator(".pstat.tone-ok")
    cached.wait_for()
    page.wait_for_function("document.querySelector('.pstat.tone-ok .pstat-value').textContent === '299'")
    assert cached.locator(".pstat-pct").text_content() == "99.7%"
    assert page.locator(".pstat.tone-failed .pstat-pct").text_content() == "0.3%"
    assert page.locator(".status-line .reason").text_content() == "some keys still to run"
    assert page.locator(".status-line .reason").get_attribute("title") == "reason: partitions_missing"
    page.wait_for_function("document.querySelector('#server-info .server-text').textContent.includes('v')")
    assert page.locator("#server-info .server-text").text_content() == f"barca serve · v{__version__}"

    page.goto(node_url(small, "pipeline.py:daily"))
    page.wait_for_selector(".pstat.tone-ok")
    assert page.locator(".panel .section-head .num").first.text_content() == "1 key"

    # the list of assets says what the failed key failed with
    page.goto(f"{small.url}/ui/#/assets")
    page.evaluate("localStorage.setItem('barca.assetsView', 'list')")
    page.reload()
    row = page.locator(".assets-table tr", has_text="orders")
    row.locator(".err-text").wait_for()
    assert row.locator(".err-text").text_content() == "[retailer=r150] feed r150 is down"


def test_a_failed_keys_page_shows_its_traceback_and_its_run(small, page):
    run_id = failed_run(small)
    page.goto(node_url(small, "pipeline.py:orders", "keys"))
    page.fill(".keys-section .search-input", "r150")
    page.wait_for_function("[...document.querySelectorAll('.key-row')].map(r => r.dataset.key).join() === 'retailer=r150'")
    page.click(".key-row .key-link")
    page.wait_for_url(re.compile(r".*/key/retailer%3Dr150$"))
    attempt = page.locator("[data-pane=key] .attempt.is-failed")
    attempt.wait_for()
    trace = attempt.locator(".traceback").text_content()
    assert "in check" in trace and "in orders" in trace and 'raise ValueError(f"feed {r} is down")' in trace
    assert "barca/engine" not in trace  # the user's frames
    assert attempt.locator(".error-head").text_content() == "ValueError: feed r150 is down"
    assert page.locator("[data-pane=key] .value-section").text_content().count("no successful attempt") == 1
    # each attempt links to its run
    attempt.locator("a.run-link").click()
    page.wait_for_url(re.compile(rf".*#/runs/{run_id}$"))
    page.wait_for_selector("[data-run-status=failed]")
    # the failed run shows the traceback of its failed step, and links it to its key's page
    run_trace = page.locator(".run-trace .traceback")
    run_trace.wait_for()
    assert "in check" in run_trace.text_content()
    page.locator(".step-link", has_text="[retailer=r150]").click()
    page.wait_for_url(re.compile(r".*/key/retailer%3Dr150$"))
    page.wait_for_selector("[data-pane=key] .attempt.is-failed .traceback")


def test_a_keys_value_is_previewed(small, page):
    page.goto(node_url(small, "pipeline.py:orders", "key/retailer%3Dr007"))
    value = page.locator("[data-pane=key] .value-json")
    value.wait_for()
    assert value.text_content() == '{\n  "retailer": "r007",\n  "rows": [\n    1,\n    2,\n    3\n  ]\n}'
    assert page.locator("[data-pane=key] .attempt .badge").first.text_content() == "success"
    # a table: its first rows, under its shape
    page.goto(node_url(small, "pipeline.py:table", "result"))
    table = page.locator("[data-pane=key] .value-table")
    table.wait_for()
    assert table.locator("thead th").all_text_contents() == ["a", "b"]
    assert table.locator("tbody tr").count() == 10
    assert table.locator("tbody tr").first.locator("td").all_text_contents() == ["0", "x0"]
    assert "50 rows × 2 columns" in page.locator("[data-pane=key] .value-section").text_content()


def test_serve_prints_the_ui_address(small, page):
    [line] = [line for line in small.lines if line.startswith("[barca] web UI: ")]
    address = line.removeprefix("[barca] web UI: ")
    assert address == f"{small.url}/ui/"
    page.goto(address)
    page.wait_for_selector(".graph-svg .node")
    assert page.locator(".graph-svg .node").count() == 3
