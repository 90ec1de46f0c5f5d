"""The web UI of `barca serve` over a large project, in a real browser: how long each view takes.

The project is the browser tests' (tests/browser/test_web_ui.py, BIG) at N keys: `orders`, a
`batch="all"` asset over N retailers, fails about N/900 keys with a schema mismatch and N/500
with an HTTP 503 naming the key; a small chain beside it. It is built once with
`barca get orders,ranked` (the build row), then `barca serve` (its warm pool on, as a user
runs it) is driven by Debian's chromium through playwright, as the tests do. Every view is
opened in a fresh browser context (no cache), REPEAT times; each time is wall time in this
process from the navigation (or the click, the key press) to the view's condition:

    graph drawn        open /ui/ -> one SVG node per asset (the graph, from /assets)
    first paint        the same, as the page measures it (performance.now() when it drew
                       the graph, from the navigation's start: what the tests assert)
    graph coloured     ... -> no node still loading (/state: `barca status` over every key,
                       in a child of the server)
    first keys page    open orders' keys tab -> its first page of key rows
    last keys page     type the last page's number + Enter -> that page's rows
    search             type a key prefix ten keys share -> exactly those ten rows
    failure groups     open orders' failures tab -> its error groups (the schema mismatch
                       group's count checked)

    memory             after the views: the server's resident memory (VmRSS) and its peak
                       (VmHWM), the warm pool's likewise, and the peak of the sum over the
                       server, the pool and all their children (sampled every 0.1 s while
                       the views load; the `barca status` child of /state included)

    .venv/bin/python benchmarks/ui.py                   # N = 200000
    .venv/bin/python benchmarks/ui.py --keys 20000 --repeat 5 --write

Needs the dev extras (playwright) and chromium (`apt-get install chromium`), as the browser
tests do. Target (the tests' own): first paint under a second, whatever N.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from urllib.parse import quote
from urllib.request import urlopen

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent / "tests"
sys.path[:0] = [str(HERE), str(TESTS), str(TESTS / "browser")]
from keyed_partitions import machine, median  # noqa: E402
from process_memory import PeakRss, kib, rss_mb  # noqa: E402
from serve import BARCA, Server, _pool_pid, _stop_pool, env  # noqa: E402
from test_web_ui import BIG, CHROMIUM_ARGS, PAGE, failing  # noqa: E402

VIEWS = ["graph drawn", "first paint, as the page counts it", "graph coloured", "first keys page",
         "last keys page", "search", "failure groups"]
TIMEOUT_MS = 600_000


def build(root: Path, keys: int) -> float:
    """Write and build the project; seconds of the build."""
    (root / "barca.toml").write_text("")
    (root / "pipeline.py").write_text(textwrap.dedent(BIG.format(keys=keys)).lstrip("\n"))
    t0 = time.perf_counter()
    done = subprocess.run([*BARCA, "get", "orders,ranked", "pipeline.py"], cwd=root, env=env(),
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    if done.returncode != 1:  # the failed keys fail the run
        raise SystemExit(f"the build exited {done.returncode}, not 1:\n{done.stderr[-2000:]}")
    return time.perf_counter() - t0


def timed(action, condition: str, page) -> float:
    """Seconds from `action()` to the page's JavaScript `condition` holding."""
    t0 = time.perf_counter()
    action()
    page.wait_for_function(condition, timeout=TIMEOUT_MS, polling=10)
    return time.perf_counter() - t0


def views(browser, url: str, keys: int, nodes: int) -> dict[str, float]:
    """One pass over the views, each page in a fresh context; seconds per view."""
    orders = f"{url}/ui/#/assets/{quote('pipeline.py:orders', safe='')}"
    last = (keys + PAGE - 1) // PAGE
    needle = f"r{keys - 7:06d}"[:-1]  # ten keys share it
    schema, _ = failing(keys)
    rows = "[...document.querySelectorAll('.key-row')]"
    out: dict[str, float] = {}

    def fresh():
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        return context, context.new_page()

    context, page = fresh()
    out["graph drawn"] = timed(lambda: page.goto(f"{url}/ui/"), "document.querySelectorAll("
                               f"'.graph-svg .node').length === {nodes}", page)
    out["first paint, as the page counts it"] = int(
        page.evaluate("document.body.dataset.firstPaintMs")) / 1000
    out["graph coloured"] = out["graph drawn"] + timed(
        lambda: None, "!document.querySelector('.graph-svg .node.tone-loading')", page)
    context.close()

    context, page = fresh()
    out["first keys page"] = timed(lambda: page.goto(f"{orders}/keys"),
                                   "document.querySelector('.key-row') && document."
                                   "querySelector('.key-row').dataset.key === 'r000000'", page)
    page.fill(".page-input", str(last))
    out["last keys page"] = timed(lambda: page.press(".page-input", "Enter"),
                                  "document.querySelector('.key-row').dataset.key === "
                                  f"'r{(last - 1) * PAGE:06d}'", page)
    out["search"] = timed(lambda: page.fill(".keys-section .search-input", needle),
                          f"{rows}.length === 10 && {rows}.every(r => "
                          f"r.dataset.key.includes('{needle}'))", page)
    context.close()

    context, page = fresh()
    out["failure groups"] = timed(lambda: page.goto(f"{orders}/failures"),
                                  "document.querySelector('[data-pane=failures] .fail-group')",
                                  page)
    counts = page.eval_on_selector_all("[data-pane=failures] .fail-group",
                                       "gs => gs.map(g => Number(g.dataset.count))")
    context.close()
    if len(counts) != 2 or schema not in counts:  # the 503s: those of the top 20 errors
        raise SystemExit(f"failure groups of {counts} keys, expected {schema} and the 503s")
    return out


def measure(keys: int, repeat: int) -> tuple[list[str], list[str]]:
    """The table's rows and its notes."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if not chromium:
        raise SystemExit("chromium is not installed (apt-get install chromium)")
    root = Path(tempfile.mkdtemp(prefix="barca-ui-"))
    try:
        built = build(root, keys)
        server = Server(root, "pipeline.py")
        try:
            pool = _pool_pid(root)
            tree = PeakRss(server.proc.pid, pool, every=0.1, descendants=True)
            rss_before = rss_mb(server.proc.pid)
            load = os.getloadavg()
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
                try:
                    url = f"http://127.0.0.1:{server.port}"
                    with urlopen(f"{url}/assets", timeout=60) as answer:
                        nodes = len(json.load(answer))
                    passes = [views(browser, url, keys, nodes) for _ in range(repeat)]
                finally:
                    browser.close()
            peak = tree.stop()
            memory = [kib(f"/proc/{pid}/status", field) / 1024
                      for pid in (server.proc.pid, pool) for field in ("VmRSS:", "VmHWM:")]
        finally:
            server.stop()
    finally:
        _stop_pool(root)
        shutil.rmtree(root, ignore_errors=True)
    rows = [f"| build: `barca get orders,ranked` | {built:.1f} s | | |"]
    for view in VIEWS:
        times = [p[view] for p in passes]
        target = "< 1 s" if view.startswith("first paint") else ""
        rows.append(f"| {view} | {times[0]:.2f} s | {median(times):.2f} s "
                    f"({min(times):.2f}-{max(times):.2f}) | {target} |")
    rows.append(f"| server memory | RSS {memory[0]:.0f} MB (peak {memory[1]:.0f} MB; "
                f"{rss_before:.0f} MB before the views) | | |")
    rows.append(f"| warm pool memory | RSS {memory[2]:.0f} MB (peak {memory[3]:.0f} MB) | | |")
    rows.append(f"| server + pool + children, peak sum | {peak:.0f} MB | | |")
    notes = ["load average (1/5/15 min) {:.2f} {:.2f} {:.2f} before the views, ".format(*load)
             + "{:.2f} {:.2f} {:.2f} after".format(*os.getloadavg())]
    return rows, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200_000, help="keys of the large asset")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the views")
    parser.add_argument("--write", action="store_true", help="append to RESULTS.md")
    args = parser.parse_args()
    rows, notes = measure(args.keys, args.repeat)
    table = "\n".join([f"machine: {machine()}", "",
                       f"| {args.keys:,} keys | first pass | median of {args.repeat} "
                       "(min-max) | target |", "|---|---|---|---|", *rows, "", *notes])
    print(table)
    if args.write:
        with open(HERE / "RESULTS.md", "a") as out:
            out.write(f"\n## The web UI at {args.keys:,} keys ({time.strftime('%Y-%m-%d')})\n\n"
                      f"`.venv/bin/python benchmarks/ui.py {' '.join(sys.argv[1:])}`\n\n"
                      f"{table}\n")


if __name__ == "__main__":
    main()
