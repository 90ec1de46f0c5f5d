"""The web UI of `barca serve` in a real browser (Debian's chromium driven by Playwright), over
the real server on a real project.

Covered: the graph draws one SVG node per asset and one edge per input, first paint under a
second; a node of 20,000 keys pages its keys (never more rows than a page in the DOM, the next
page shows other keys, a page number jumps, a search narrows); failed keys are grouped by their
error, as on a failed run's page; the Run button starts a run whose live progress and end (success) the page shows, with
its steps and log; read-only mode hides the Run button and shows the tag; load errors show as a
banner; the UI works under a path prefix (every request relative); a phone-sized screen.

The 20,000-key project (200 pages of keys; 23 keys fail with a schema mismatch and 40 with an
HTTP 503 naming the key: more distinct errors than the server's 20 groups) is built once per
session with a `batch="all"` asset (BARCA_UI_TEST_KEYS=N builds N keys instead; the assertions
follow N). The same pages at 200,000 keys are timed by benchmarks/ui.py, not here: that build
takes four times as long (13 s against 3 s on an idle 2-core machine) in every CI run. Each test
saves a screenshot in tests/browser/artifacts/<test>.png. Without chromium or the playwright
package the tests skip, unless BARCA_REQUIRE_BROWSER=1 (then they fail).
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest

from conftest import ServeProcess, barca, write

ARTIFACTS = Path(__file__).parent / "artifacts"
KEYS = int(os.environ.get("BARCA_UI_TEST_KEYS", "20000"))
PAGE = 100
# ---------------------------------------------------------------------------------------------
# The pipeline: KEYS keys of a batched asset, some failing with two kinds of error; a small
# chain with a failed key that blocks a key below it; a fast asset and a slower partitioned one
# for the Run button (never run by the fixture); a scheduled asset and a task.

BIG = """
    import time

    from barca import Failed, Schedule, asset, collect, partitions, task

    N = {keys}


    @asset(partitions={{"retailer": partitions([f"r{{i:06d}}" for i in range(N)])}}, batch="all")
    def orders(retailer: list[str]) -> dict:
        out = {{}}
        for r in retailer:
            n = int(r[1:])
            if n % 900 == 11:
                out[r] = Failed("schema mismatch: column 'amount' missing")
            elif n % 500 == 7:
                out[r] = Failed(f"upstream feed for {{r}} returned HTTP 503")
            else:
                out[r] = n
        return out


    @asset()
    def config() -> dict:
        return {{"currency": "EUR"}}


    @asset(partitions={{"store": partitions([f"s{{i:02d}}" for i in range(30)])}},
           inputs={{"config": config}})
    def stores(store: str, config: dict) -> dict:
        if store == "s13":
            raise ValueError(f"store {{store}} has no address")
        return {{"store": store, **config}}


    @asset(partitions={{"store": partitions([f"s{{i:02d}}" for i in range(30)])}},
           inputs={{"stores": stores}})
    def ranked(store: str, stores: dict) -> dict:
        return {{**stores, "rank": 1}}


    @asset()
    def hello() -> str:
        print("hello from the browser test")
        return "hello"


    @asset(partitions={{"part": partitions([f"p{{i:02d}}" for i in range(12)])}})
    def slow(part: str) -> str:
        time.sleep(2)
        print("slow step", part)
        return part


    @asset(inputs={{"parts": collect(slow)}}, freshness=Schedule("0 6 * * *"))
    def summary(parts: list) -> int:
        return len(parts)


    @task(inputs={{"summary": summary}})
    def publish(summary: int) -> str:
        return "published"
"""


def failing(n_keys: int) -> tuple[int, int]:
    """(schema mismatches, HTTP 503s) among n_keys keys, as BIG fails them."""
    schema = sum(1 for n in range(n_keys) if n % 900 == 11)
    http = sum(1 for n in range(n_keys) if n % 900 != 11 and n % 500 == 7)
    return schema, http


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def big(tmp_path_factory, chromium):
    """The KEYS-key project, built once, and a server over it."""
    root = tmp_path_factory.mktemp("ui-big")
    write(root, {"barca.toml": "", "pipeline.py": BIG.format(keys=KEYS)})
    started = time.monotonic()
    result = barca(root, "get", "orders,ranked", "pipeline.py", timeout=1800)
    assert result.code == 1, result.stderr[-2000:]  # the failed keys fail the run
    built = time.monotonic() - started
    server = ServeProcess(root, ("pipeline.py",))
    server.built_seconds = built
    yield server
    server.stop()


@pytest.fixture(scope="module")
def read_only(tmp_path_factory, chromium):
    """A small project with a file that does not load, served read-only."""
    root = tmp_path_factory.mktemp("ui-ro")
    write(root, {
        "barca.toml": "",
        "pipeline.py": """
            from barca import asset

            @asset()
            def a() -> int:
                return 1

            @asset(inputs={"a": a})
            def b(a: int) -> int:
                return a + 1
        """,
        "broken.py": """
            from barca import asset

            @asset(
            def oops() -> int:
                return 1
        """,
    })
    server = ServeProcess(root, ("--read-only",))
    yield server
    server.stop()


TOKEN = "browser-test-token-0123456789"


@pytest.fixture(scope="module")
def tokened(tmp_path_factory, chromium):
    """A small project served with a token (BARCA_SERVE_TOKEN)."""
    root = tmp_path_factory.mktemp("ui-token")
    write(root, {
        "barca.toml": "",
        "pipeline.py": """
            from barca import asset

            @asset()
            def greeting() -> str:
                print("hello from behind the token")
                return "hi"
        """,
    })
    server = ServeProcess(root, ("pipeline.py",), token=TOKEN)
    yield server
    server.stop()


def node_url(server: ServeProcess, node: str, tab: str = "") -> str:
    return f"{server.url}/ui/#/assets/{quote(node, safe='')}" + (f"/{tab}" if tab else "")


def key_rows(pg) -> list[str]:
    """The keys of the page's rows, as the server writes every key: their labels."""
    return pg.eval_on_selector_all(".key-row", "rows => rows.map(r => r.dataset.key)")


# ---------------------------------------------------------------------------------------------
# Tests


def test_graph_shows_every_asset(big, page):
    assets = big.get("assets").json()
    page.goto(f"{big.url}/")  # the root redirects to the UI
    page.wait_for_function(f"document.querySelectorAll('.graph-svg .node').length === {len(assets)}")
    assert page.url.endswith("/ui/")
    assert page.locator(".graph-svg .node").count() == len(assets)
    edges = sum(len(a["inputs"]) for a in assets)
    assert page.locator(".graph-svg .edge").count() == edges
    shown = set(page.eval_on_selector_all(".graph-svg .node", "ns => ns.map(n => n.dataset.id)"))
    assert shown == {a["id"] for a in assets}
    # drawn from /assets alone, before /state (which runs `barca status` over every key)
    # has answered: first paint under a second (the best of three loads, the machine may be busy)
    paints = [int(page.evaluate("document.body.dataset.firstPaintMs"))]
    for _ in range(2):
        page.reload()
        page.wait_for_selector(".graph-svg .node")
        paints.append(int(page.evaluate("document.body.dataset.firstPaintMs")))
    assert min(paints) < 1000, f"first paint after {paints} ms"
    # then /state colours the nodes: the KEYS-key node counts its keys and fails
    orders = page.locator('.graph-svg .node[data-id="pipeline.py:orders"]')
    page.wait_for_function("!document.querySelector('.graph-svg .node.tone-loading')", timeout=120_000)
    schema, http = failing(KEYS)
    assert orders.get_attribute("data-tone") == "failed"
    text = orders.text_content()
    assert f"{KEYS - schema - http:,} / {KEYS:,}" in text
    assert f"{schema + http:,} failed" in text
    ranked = page.locator('.graph-svg .node[data-id="pipeline.py:ranked"]')
    assert ranked.get_attribute("data-tone") == "blocked"
    assert page.locator("#readonly-tag").is_hidden()
    # the scheduled node's next fire, read from /state's RFC 3339 `next_run`
    summary = page.locator('.graph-svg .node[data-id="pipeline.py:summary"]')
    assert re.search(r"next in \d+(s| min| h)", summary.text_content()), summary.text_content()

    # the schedule page: next and last fire, read from /schedule's RFC 3339 times
    page.goto(f"{big.url}/ui/#/schedule")
    row = page.locator(".page-schedule tbody tr").first
    row.wait_for()
    cells = row.locator("td").all_text_contents()
    assert re.search(r"in \d+(s| min| h)$", cells[2]), cells
    assert re.search(r"(ago|just now)$", cells[3]), cells


def test_partition_keys_are_paged(big, page):
    page.goto(node_url(big, "pipeline.py:orders", "keys"))
    page.wait_for_selector(".key-row", timeout=120_000)
    first = key_rows(page)
    assert 0 < len(first) <= PAGE
    assert first[0] == "retailer=r000000"
    # one page of key rows, never a row per key: the only other rows in the document are
    # table headers and the history tab's last 10 executions
    assert page.locator("tr.key-row").count() <= PAGE
    assert page.locator("tr").count() <= PAGE + 2 + 11
    assert page.evaluate("document.getElementsByTagName('*').length") < 5000
    assert page.locator(".pager .range").text_content().startswith(f"1–{PAGE} of {KEYS:,}")

    page.click("[data-page=next]")
    page.wait_for_function(f"document.querySelector('.key-row').dataset.key !== '{first[0]}'")
    second = key_rows(page)
    assert len(second) <= PAGE
    assert not set(first) & set(second)
    assert second[0] == f"retailer=r{PAGE:06d}"
    assert page.locator(".pager .range").text_content().startswith(f"{PAGE + 1}–{2 * PAGE} of")

    # straight to the last page
    last = (KEYS + PAGE - 1) // PAGE
    page.fill(".page-input", str(last))
    page.press(".page-input", "Enter")
    page.wait_for_function(f"document.querySelector('.key-row').dataset.key === 'retailer=r{(last - 1) * PAGE:06d}'")
    assert key_rows(page)[-1] == f"retailer=r{KEYS - 1:06d}"
    assert page.locator("[data-page=next]").is_disabled()

    # a search narrows the keys on the server
    needle = f"r{KEYS - 7:06d}"[:-1]  # ten keys share it
    page.fill(".keys-section .search-input", needle)
    page.wait_for_function(f"[...document.querySelectorAll('.key-row')].every(r => r.dataset.key.includes('{needle}'))"
                           " && document.querySelectorAll('.key-row').length > 0")
    assert len(key_rows(page)) == 10
    page.fill(".keys-section .search-input", "")
    page.wait_for_function("document.querySelector('.key-row') && document.querySelector('.key-row').dataset.key === 'retailer=r000000'")
    # each row says when its key last ran, read from the page's RFC 3339 `created_at`
    updated = page.locator(".key-row td").nth(2).text_content()
    assert re.search(r"(ago|just now)$", updated), updated


def test_failed_keys_are_grouped_by_error(big, page):
    schema, http = failing(KEYS)
    page.goto(node_url(big, "pipeline.py:orders", "failures"))
    page.wait_for_selector("[data-pane=failures] .fail-group", timeout=120_000)
    groups = page.locator("[data-pane=failures] .fail-group")
    schema_group = groups.filter(has_text="schema mismatch: column 'amount' missing")
    assert schema_group.count() == 1
    assert schema_group.get_attribute("data-count") == str(schema)
    assert "BatchKeyFailed" in schema_group.text_content()
    # errors that name their key are one group, the key written {key}
    texts = groups.locator(".fail-error").all_text_contents()
    assert "upstream feed for {key} returned HTTP 503" in texts
    tab = page.locator(".panel-tab[data-tab=failures] .count").text_content()
    assert tab == f"{schema + http:,}"
    page.screenshot(path=str(ARTIFACTS / "failures_tab.png"))

    # a group's key, named by its label, finds that key
    chip = schema_group.locator("button.chip-btn").first
    label = chip.text_content()
    assert re.fullmatch(r"retailer=r\d{6}", label), label
    chip.click()
    page.wait_for_function(f"[...document.querySelectorAll('.key-row')].map(r => r.dataset.key).join() === '{label}'")
    page.goto(node_url(big, "pipeline.py:orders", "failures"))
    page.wait_for_selector("[data-pane=failures] .fail-group", timeout=120_000)
    schema_group = page.locator("[data-pane=failures] .fail-group").filter(
        has_text="schema mismatch: column 'amount' missing")

    # one group's keys: every listed key failed with that error
    schema_group.locator("button.list-group").click()
    page.wait_for_selector(".keys-note .error-filter")
    page.wait_for_function("document.querySelectorAll('.key-row').length > 0")
    note = page.locator(".keys-note").text_content()
    assert f"{schema:,} of" in note and "schema mismatch" in note, note
    assert page.locator(".key-row").count() == min(PAGE, schema)
    page.locator(".keys-note .error-filter").click()  # and back to every key
    page.wait_for_function("!document.querySelector('.keys-note .error-filter')")
    page.goto(node_url(big, "pipeline.py:orders", "failures"))
    page.wait_for_selector("[data-pane=failures] .fail-group", timeout=120_000)

    # the failed keys themselves, with their whole error
    page.click("text=List failed keys")
    page.wait_for_function("document.querySelectorAll('.key-row').length > 0 && "
                           "[...document.querySelectorAll('.key-row')].every(r => r.classList.contains('is-failed'))")
    assert page.locator(".key-row").count() == min(PAGE, schema + http)
    row = page.locator(".key-row").first
    assert row.get_attribute("data-key") == "retailer=r000007"
    row.click()
    assert "upstream feed for r000007 returned HTTP 503" in page.locator(".key-detail pre").text_content()

    # a failed key blocks its key below: the node says which
    page.goto(node_url(big, "pipeline.py:ranked"))
    page.wait_for_selector(".panel .badge.tone-blocked", timeout=120_000)
    assert "store=s13" in page.locator(".panel").text_content()


def test_a_failed_runs_page_shows_the_failure_groups_the_server_sent(big, page):
    """The run page shows the groups of the run's detail (`failure_groups`, grouped by the
    server): an error that quotes its key reads `{key}`, the look the UI had when it grouped
    them itself."""
    [run] = [r for r in big.runs() if r["target"] == "orders,ranked"]
    detail = big.get(f"runs/{run['run_id']}").json()
    page.goto(f"{big.url}/ui/#/runs/{run['run_id']}")
    page.wait_for_selector("[data-run-status=failed]")
    page.wait_for_selector(".fail-group")
    shown = page.locator(".fail-group .fail-error").all_text_contents()
    assert shown == [g["error"] for g in detail["failure_groups"]][:20]
    assert "store {key} has no address" in shown
    assert "upstream feed for {key} returned HTTP 503" in shown


def test_run_button_runs_the_target_and_shows_it_finish(big, page):
    page.goto(node_url(big, "pipeline.py:hello"))
    button = page.locator("[data-action=run]")
    button.wait_for()
    assert "Materialize" in button.text_content()
    button.click()
    page.wait_for_url(re.compile(r".*#/runs/[0-9a-f]+$"))
    run_id = page.url.rsplit("/", 1)[1]
    page.wait_for_selector("[data-run-status=success]", timeout=180_000)
    assert page.locator(".run-status").text_content().strip() == "success"
    page.wait_for_selector(".log-line:has-text('hello from the browser test')", timeout=30_000)
    assert "hello" in page.locator(".run-meta").text_content()
    # recorded, and the runs list says so
    assert big.get(f"runs/{run_id}").json()["run"]["status"] == "success"
    page.click(".crumbs a")
    row = page.locator(f"tr[data-run='{run_id}']")
    row.wait_for()
    assert "success" in row.text_content()
    assert "api" in row.text_content()


def test_live_progress_of_a_run(big, page):
    page.goto(node_url(big, "pipeline.py:slow"))
    page.locator(".split-btn .split").click()
    page.click(".menu button:has-text('Recompute')")
    # a partitioned asset asks which keys first, counted by a dry run
    page.wait_for_selector("[data-action=confirm-recompute]:has-text('Recompute 12 keys')")
    page.locator("[data-action=confirm-recompute]").click()
    page.wait_for_url(re.compile(r".*#/runs/[0-9a-f]+$"))
    # the event stream drives the progress bar while the run is live
    page.wait_for_selector(".run-progress:has-text('of 12 steps')", timeout=120_000)
    assert page.locator("[data-action=cancel]").is_visible()
    # keys handed to the workers show before they finish (a batched call says nothing else)
    page.wait_for_selector(".run-main table:has-text('/ 12')", timeout=60_000)
    page.screenshot(path=str(ARTIFACTS / "live_progress.png"))
    # the run's record as read while it runs is what the page holds when the stream ends,
    # until it reads the record again: served here in place of the new one, the page must
    # still show the stream's counts, not an empty table that says nothing ran
    run_id = page.url.rsplit("/", 1)[1]
    running = big.get(f"/runs/{run_id}").json()
    assert running["run"]["status"] == "running"  # 12 keys of 2 s each: seconds to go
    detail = re.compile(rf".*/runs/{run_id}$")
    page.route(detail, lambda route: route.fulfill(json=running))
    page.wait_for_selector("[data-run-status=success]", timeout=180_000)
    assert page.locator(".run-progress").is_hidden()
    nodes = page.locator(".run-main table").first.text_content()
    assert "slow" in nodes and "12" in nodes, nodes
    # so do its lines (the record read earlier has fewer), and no steps table of that record
    assert page.locator(".log-line:has-text('slow step p11')").count() == 1
    assert page.locator(".run-main h2:has-text('Steps')").is_hidden()
    page.unroute(detail)
    page.reload()  # the record, now read as it ended
    page.wait_for_selector("[data-run-status=success]")
    nodes = page.locator(".run-main table").first.text_content()
    assert "slow" in nodes and "12" in nodes, nodes
    assert page.locator(".log-line:has-text('slow step p11')").count() == 1


def test_read_only_hides_run_and_shows_the_tag(read_only, page):
    page.goto(f"{read_only.url}/ui/#/assets/{quote('pipeline.py:b', safe='')}")
    page.wait_for_selector(".panel h2:has-text('b')")
    page.wait_for_selector("#readonly-tag:visible")
    assert page.locator("#readonly-tag").text_content() == "read-only"
    page.wait_for_timeout(300)
    assert page.locator("[data-action=run]").count() == 0
    assert page.locator(".graph-svg .node").count() == 2


def test_load_errors_show_as_a_banner(read_only, page):
    page.goto(f"{read_only.url}/ui/")
    banner = page.locator("[data-banner=load-errors]")
    banner.wait_for()
    text = banner.text_content()
    assert "broken.py" in text
    assert "was never closed" in text
    assert "1 file did not load" in text


class PrefixProxy:
    """A reverse proxy serving `upstream` at /prefix/ (streaming, so server-sent events pass
    through); a request for any other path is refused and recorded."""

    def __init__(self, upstream: str) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import http.client

        host, port = urlsplit(upstream).hostname, urlsplit(upstream).port
        outside = self.outside = []

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the body ends when the connection closes

            def log_message(self, *args):
                pass

            def forward(self):
                if not (self.path == "/prefix" or self.path.startswith("/prefix/")):
                    outside.append(self.path)
                    self.send_error(404)
                    return
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                conn = http.client.HTTPConnection(host, port, timeout=120)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "connection")}
                conn.request(self.command, self.path[len("/prefix"):] or "/", body, headers)
                res = conn.getresponse()
                self.send_response(res.status)
                for k, v in res.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.end_headers()
                while chunk := res.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                conn.close()

            do_GET = do_POST = do_DELETE = do_HEAD = forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_every_request_is_relative_under_a_path_prefix(big, page):
    """Behind a proxy at /prefix/ the UI asks only for /prefix/...: nothing it requests
    (pages, API, event stream, the Run button's POST) goes to another path."""
    proxy = PrefixProxy(big.url)
    try:
        page.goto(f"{proxy.url}/prefix/ui")  # the server's relative redirect: /prefix/ui/
        page.wait_for_selector(".graph-svg .node")
        assert urlsplit(page.url).path == "/prefix/ui/"
        page.wait_for_function("!document.querySelector('.graph-svg .node.tone-loading')",
                               timeout=120_000)
        page.click('.graph-svg .node[data-id="pipeline.py:stores"]')
        page.click(".panel-tab[data-tab=keys]")
        page.wait_for_selector(".key-row")
        page.goto(f"{proxy.url}/prefix/ui/#/assets/{quote('pipeline.py:hello', safe='')}")
        page.click("[data-action=run]")
        page.wait_for_url(re.compile(r".*/prefix/ui/#/runs/[0-9a-f]+$"))
        page.wait_for_selector("[data-run-status=success]", timeout=180_000)
        page.click(".tabs a[data-tab=runs]")
        page.wait_for_selector("tr[data-run]")
        assert not proxy.outside, f"requests outside the prefix: {proxy.outside}"
    finally:
        proxy.close()


@pytest.mark.parametrize("page", [{"width": 390, "height": 844}], indirect=True)
def test_phone_sized_screen(big, page):
    page.goto(node_url(big, "pipeline.py:stores"))
    page.wait_for_selector(".panel h2")
    page.wait_for_selector(".panel .badge.tone-failed", timeout=120_000)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the page is {width}px wide on a 390px screen"
    box = page.locator(".panel").bounding_box()
    assert box["width"] >= 380  # the panel takes the screen


def test_a_server_with_a_token_asks_for_it_once_and_runs(tokened, page):
    """The UI asks for the token, keeps it for the tab, and every request (the event stream
    and the Run button's POST included) carries it."""
    page.goto(f"{tokened.url}/ui/#/assets/{quote('pipeline.py:greeting', safe='')}")
    form = page.locator("#token-form")
    form.wait_for(state="visible")
    form.locator("input").fill("not-the-token-0123456789")
    form.locator("button").click()
    page.wait_for_selector("#token-form .token-wrong:visible")
    form.locator("input").fill(TOKEN)
    form.locator("button").click()
    page.locator("[data-action=run]").click()
    page.wait_for_url(re.compile(r".*#/runs/[0-9a-f]+$"))
    page.wait_for_selector("[data-run-status=success]", timeout=180_000)
    page.wait_for_selector(".log-line:has-text('hello from behind the token')", timeout=30_000)
    page.reload()  # the tab keeps the token: no second prompt
    page.wait_for_selector("[data-run-status=success]")
    assert form.is_hidden()
    assert page.evaluate("sessionStorage.getItem('barca.token')") == TOKEN
    assert page.evaluate("localStorage.getItem('barca.token')") is None

