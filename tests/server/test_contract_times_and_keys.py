"""One time format and one key-label format in every JSON answer, CLI and HTTP alike.

Every moment is RFC 3339 in UTC with milliseconds (`2026-12-05T16:30:18.123Z`); every
partition key is its label (`retailer=r03`, `day=d1,region=eu`). A small project with a keyed
asset (a failed key), a two-dimension asset and a scheduled one is run once; then every
`--json` command and every HTTP route (run events, a dry run and `/openapi.json` too) is
walked whole: a field that holds a moment (named `*_at`, `next_fire`, `last_fired`,
`next_run`, `paused_until`, `ts`) must be in the one form, a text anywhere that looks like a
time must be one, a number that looks like epoch seconds must not be there, and every key
(`key`, `partition_key`, `partition`, the key lists, a step id's brackets, `final_output`'s
keys) must be one of the project's labels. Each walk also says what it saw, so that a route
that stopped holding moments or keys cannot pass unseen.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import barca, barca_here, poll, stop_pools, wait_until_ready, write

PIPELINE = """
    from barca import Schedule, asset, partitions

    @asset(partitions={"retailer": partitions(["r01", "r02", "r03"])})
    def sales(retailer: str) -> int:
        print("sales", retailer)
        if retailer == "r02":
            raise ValueError(f"no feed for {retailer}")
        return len(retailer)

    @asset(partitions={"region": partitions(["eu", "us"]), "day": partitions(["d1", "d2"])})
    def grid(region: str, day: str) -> str:
        print("grid", region, day)
        if (region, day) == ("us", "d2"):
            raise ValueError("no grid today")
        return region + day

    @asset(freshness=Schedule("0 3 * * *"))
    def daily() -> int:
        return 1
"""

LABELS = {"retailer=r01", "retailer=r02", "retailer=r03", "day=d1,region=eu",
          "day=d1,region=us", "day=d2,region=eu", "day=d2,region=us"}
ONE_FORM = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
LOOKS_LIKE_A_TIME = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d")
MOMENT_NAMES = {"next_fire", "last_fired", "next_run", "paused_until", "ts"}
KEY_NAMES = {"key", "partition_key", "partition"}
KEY_LISTS = {"sample_keys", "missing_keys", "failed_keys", "blocked_keys", "will_run_keys"}
STEP_ID = re.compile(r"[\w./-]+\.py:\w+\[(.*)\]")


def is_moment(name: str) -> bool:
    return name.endswith("_at") or name in MOMENT_NAMES


class Walk:
    """What a walk over JSON answers found wrong, and the (source, field) pairs it saw a
    moment or a key in."""

    def __init__(self) -> None:
        self.wrong: list[str] = []
        self.moments: set[tuple[str, str]] = set()
        self.keys: set[tuple[str, str]] = set()

    def __call__(self, source: str, value: Any, path: str = "", name: str = "") -> None:
        where = f"{source}: {path or '.'} = {value!r}"[:300]
        if isinstance(value, dict):
            for key, item in value.items():
                self._field(source, f"{path}.{key}", key, item)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self(source, item, f"{path}[{i}]", name)
        elif isinstance(value, str):
            if LOOKS_LIKE_A_TIME.search(value) and not (is_moment(name)
                                                        and ONE_FORM.fullmatch(value)):
                self.wrong.append(f"a time outside a moment's field or form: {where}")
            step = STEP_ID.fullmatch(value)
            if step and step.group(1) not in LABELS:
                self.wrong.append(f"a step id whose key is no label: {where}")
            elif step:
                self.keys.add((source, "step id"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and \
                1e9 <= value <= 1e10 and not name.endswith(("_bytes", "_seconds")):
            self.wrong.append(f"a number like epoch seconds: {where}")

    def _field(self, source: str, path: str, name: str, value: Any) -> None:
        if is_moment(name):
            if value is not None and not (isinstance(value, str) and ONE_FORM.fullmatch(value)):
                self.wrong.append(f"a moment not in the one form: {source}: {path} = {value!r}")
            elif value is not None:
                self.moments.add((source, name))
        if name in KEY_NAMES and not isinstance(value, dict):  # a request's {dim: [keys]}
            self._key(source, path, name, value)
        if name in KEY_LISTS:
            for i, item in enumerate(value or []):
                self._key(source, f"{path}[{i}]", name, item)
        if name == "final_output" and isinstance(value, dict):
            for label in value:
                self._key(source, f"{path} key", name, label)
        self(source, value, path, name)

    def _key(self, source: str, path: str, name: str, value: Any) -> None:
        if value is None:
            return
        if value not in LABELS:
            self.wrong.append(f"a key that is no label: {source}: {path} = {value!r}")
        else:
            self.keys.add((source, name))


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> tuple[Path, dict]:
    """The project, after one run of everything (two keys fail)."""
    root = tmp_path_factory.mktemp("times")
    write(root, {"barca.toml": "", "p.py": PIPELINE})
    return root, barca(root, "get", "p.py").expect(1).json


def test_every_json_command_writes_one_time_format_and_key_labels(ran) -> None:
    root, got = ran
    walk = Walk()
    walk("get", got)
    run_id = got["run_id"]
    for args in (["history", "--json"], ["history", run_id, "--json"],
                 ["stats", "sales", "p.py", "--json"], ["stats", "grid", "p.py", "--json"],
                 ["stats", "daily", "p.py", "--json"], ["status", "p.py", "--json"],
                 ["list", "p.py", "--json"], ["plan", "p.py"], ["doctor", "p.py", "--json"],
                 ["gc", "--dry-run", "--json"], ["get", "grid", "p.py", "--dry-run", "--json"]):
        source = " ".join(a for a in args[:2] if not a.startswith("-"))
        walk(source, barca_here(root, *args).expect(0).json)
    logs = barca_here(root, "logs", run_id, "--json").expect(0).stdout
    walk("logs", json.loads(logs))
    assert walk.wrong == []
    assert {("history", "started_at"), ("history", "finished_at"),
            (f"history {run_id}", "created_at"), ("stats sales", "created_at"),
            ("status p.py", "created_at"), ("list p.py", "next_fire"),
            ("logs", "ts")} <= walk.moments, walk.moments
    assert {("get", "final_output"), ("get", "will_run_keys"), ("get", "step id"),
            (f"history {run_id}", "partition_key"), ("stats sales", "partition_key"),
            ("stats grid", "partition_key"), ("status p.py", "partition"),
            ("status p.py", "failed_keys"), ("logs", "partition_key"),
            ("get grid", "will_run_keys")} <= walk.keys, walk.keys


def test_every_http_answer_writes_one_time_format_and_key_labels(ran, serve) -> None:
    root, got = ran
    server = serve(root, "p.py", "--timezone", "utc")
    poll(lambda: server.get("/schedule").json()[0]["last_fired"], "the job anchored")
    started = server.start_run({"targets": ["sales"]})
    with server.client.stream("GET", f"/runs/{started}/events") as response:
        assert response.status_code == 200
        events = [json.loads(line[5:]) for line in response.iter_lines()
                  if line.startswith("data:")]
    server.wait_status(started)
    dry = server.post("/runs", json={"targets": ["grid"], "dry_run": True})
    assert dry.status_code == 200, dry.text
    walk = Walk()
    walk("events", events)
    walk("dry run", dry.json())
    first = got["run_id"]
    for path in ("/health", "/assets", "/state", "/schedule", "/runs", f"/runs/{first}",
                 f"/runs/{started}", f"/logs/{first}", f"/status/{started}",
                 "/assets/sales", "/assets/grid", "/assets/daily", "/assets/sales/partitions",
                 "/assets/grid/partitions", "/assets/grid/partitions?status=failed",
                 "/history", f"/history/{first}", "/nodes", "/list", "/stats/sales"):
        answer = server.get(path)
        assert answer.status_code == 200, (path, answer.text)
        walk(path, answer.json())
    assert walk.wrong == []
    assert {("/schedule", "next_fire"), ("/schedule", "last_fired"), ("/state", "next_run"),
            ("/state", "created_at"), ("/runs", "started_at"), ("/runs", "finished_at"),
            (f"/status/{started}", "started_at"), (f"/status/{started}", "finished_at"),
            ("/assets/sales", "created_at"), ("/assets/sales/partitions", "created_at"),
            ("/history", "started_at"), (f"/history/{first}", "created_at"),
            ("/nodes", "created_at"), ("/list", "next_fire"),
            ("/stats/sales", "created_at")} <= walk.moments, walk.moments
    assert {("events", "step id"), ("events", "final_output"), ("dry run", "will_run_keys"),
            (f"/runs/{first}", "key"), ("/assets/sales", "key"), ("/assets/grid", "key"),
            ("/assets/sales/partitions", "key"), ("/assets/sales/partitions", "sample_keys"),
            ("/assets/grid/partitions", "key"),
            ("/assets/grid/partitions?status=failed", "sample_keys"),
            (f"/history/{first}", "partition_key"), ("/state", "failed_keys"),
            ("/stats/sales", "partition_key")} <= walk.keys, walk.keys
    # what an answer shows names it back: a key's label as `?key=`, a moment as `--since`
    output = server.get(f"/runs/{first}/output", params={"node": "grid",
                                                         "key": "day=d1,region=eu"})
    assert output.status_code == 200 and output.json() == "eud1", output.text
    since = server.get("/runs").json()["runs"][-1]["started_at"]
    listed = barca_here(root, "history", "--since", since, "--json").expect(0).json
    assert first in [r["run_id"] for r in listed["runs"]]


def test_the_api_document_declares_every_moment_in_the_one_form(ran, serve) -> None:
    server = serve(ran[0], "p.py")
    document = server.get("/openapi.json").json()
    declared, wrong = [], []

    def visit(schema: Any, path: str) -> None:
        if isinstance(schema, dict):
            for name, prop in (schema.get("properties") or {}).items():
                if is_moment(name):
                    declared.append(f"{path}.{name}")
                    if prop.get("format") != "date-time" or \
                            not ONE_FORM.fullmatch(prop["examples"][0]):
                        wrong.append(f"{path}.{name}: {prop}")
            for key, item in schema.items():
                visit(item, f"{path}/{key}")
        elif isinstance(schema, list):
            for item in schema:
                visit(item, path)

    visit(document["components"]["schemas"], "")
    assert wrong == []
    assert len(declared) >= 15, declared


def test_the_pool_listing_writes_its_start_in_the_one_form(ran) -> None:
    root = ran[0]
    warm = {"BARCA_WARM_SECONDS": "60"}
    barca(root, "get", "daily", "p.py", "--refresh", "daily", env=warm).expect(0)
    try:
        wait_until_ready(root, warm)
        pools = barca(root, "pool", "--json").expect(0).json["pools"]
        walk = Walk()
        walk("pool", pools)
        assert walk.wrong == [] and ("pool", "started_at") in walk.moments, (walk.wrong, pools)
    finally:
        stop_pools(root)
