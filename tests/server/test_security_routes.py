"""No GET runs anything (issue 26, item 1): a real `barca serve` on loopback, the exploit
URLs of the issue, side effects counted in files the pipeline appends to.

`GET /cli/{command}` runs only the read-only commands, parsed by their own parser and
checked; a dry run (it observes sensors) goes through `POST /runs`; the typed read routes
answer what the CLI prints with --json, with validated parameters.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import barca, lines, write

PIPELINE = """
    from barca import asset, sensor, task

    @sensor()
    def watcher() -> int:
        with open("sensor.log", "a") as f:
            f.write("observed\\n")
        return 1

    @asset(inputs={"w": watcher})
    def raw(w: int) -> dict:
        return {"a": w}

    @task(inputs={"raw": raw})
    def publish(raw: dict) -> None:
        with open("published.log", "a") as f:
            f.write(f"published {raw['a']}\\n")
"""

# a pipeline file the server does not serve: importing it (as evaluating partitions(KEYS)
# would) leaves a marker
OUTSIDE = """
    import pathlib
    pathlib.Path(__file__).with_name("imported.marker").write_text("imported")
    from barca import asset, partitions

    KEYS = ["a", "b"]

    @asset(partitions={"k": partitions(KEYS)})
    def planted(k: str) -> str:
        return k
"""


def _listing(root: Path) -> list[str]:
    """Every path under the project (what a request must not add to), but SQLite's own
    -wal and -shm files, which come and go with its connections (issue 26 item 11)."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if not p.name.endswith(("-wal", "-shm")))


def _ran(root: Path) -> list[str]:
    return lines(root / "published.log") + lines(root / "sensor.log")


@pytest.fixture
def ran(project: Path) -> Path:
    """The project, computed once (a run of publish recorded), its side-effect files removed."""
    write(project, {"p.py": PIPELINE})
    barca(project, "run", "publish", "p.py").expect(0)
    (project / "published.log").unlink()
    (project / "sensor.log").unlink()
    return project


def test_a_get_with_dry_run_hidden_in_a_value_runs_no_task(ran: Path, serve) -> None:
    server = serve(ran, "p.py", "--no-schedule")
    exploits = [
        [("arg", "publish"), ("arg", "p.py"), ("arg", "--run-id"), ("arg", "--dry-run")],
        [("arg", "publish"), ("arg", "p.py"), ("arg", "--run-id"), ("arg", "--dry-run"),
         ("arg", "--env"), ("arg", "fresh")],
        [("arg", "publish"), ("arg", "--dry-run"), ("arg", "--refresh-all")],
    ]
    for params in exploits:
        got = server.get("/cli/run", params=params)
        assert got.status_code == 404, got.text
        assert "POST /runs" in got.json()["remediation"]
        assert '"dry_run": true' in got.json()["remediation"]
    assert _ran(ran) == []  # neither the task nor the sensor upstream of it ran
    assert len(barca(ran, "history").expect(0).json["runs"]) == 1  # and no run was recorded
    assert not (ran / ".barca" / "envs").exists()


def test_a_get_dry_run_over_get_runs_no_sensor(ran: Path, serve) -> None:
    server = serve(ran, "p.py", "--no-schedule")
    got = server.get("/cli/get", params=[("arg", "raw"), ("arg", "p.py"), ("arg", "--dry-run")])
    assert got.status_code == 404, got.text
    assert "dry_run" in got.json()["remediation"]
    # the read-only views plan from stored state: they observe no sensor either
    for command, args in [("status", []), ("status", ["raw", "p.py"]), ("list", ["p.py"]),
                          ("history", []), ("logs", []), ("stats", ["raw"])]:
        got = server.get(f"/cli/{command}", params=[("arg", a) for a in args])
        assert got.status_code == 200, (command, got.text)
        assert got.json()["exit_code"] == 0, (command, got.json())
    nodes = server.get("/nodes")
    assert nodes.status_code == 200, nodes.text
    assert lines(ran / "sensor.log") == []


@pytest.mark.parametrize("mode", ["writable", "read_only"])
def test_an_env_name_in_a_request_creates_nothing(ran: Path, serve, mode: str) -> None:
    server = serve(ran, "p.py", "--no-schedule", *(["--read-only"] if mode == "read_only"
                                                  else []))
    before = _listing(ran)
    for command, args in [("status", []), ("history", []), ("logs", []), ("stats", ["raw"]),
                          ("get", ["raw", "--dry-run"]), ("run", ["publish", "--dry-run"])]:
        for env in (["--env", f"fresh_{command}"], [f"--env=other_{command}"]):
            got = server.get(f"/cli/{command}", params=[("arg", a) for a in [*args, *env]])
            assert got.status_code in (400, 404), (command, env, got.status_code, got.text)
            body = got.json()
            assert "--env" in body["error"] or "POST /runs" in body["remediation"], body
    assert _listing(ran) == before  # no .barca/envs/<name>/, nothing at all
    assert _ran(ran) == []


def test_the_cli_route_refuses_what_is_not_a_read(ran: Path, serve, tmp_path_factory) -> None:
    outside = write(tmp_path_factory.mktemp("elsewhere"), {"evil.py": OUTSIDE})
    write(ran, {"other.py": OUTSIDE})  # in the project, but not served
    server = serve(ran, "p.py", "--no-schedule")
    refused = {
        "status": [["other.py"], ["raw", "other.py"], ["planted", "p.py"], ["."],
                   [str(outside / "evil.py")], ["raw", str(outside / "evil.py")],
                   [f"{outside}/"], ["--server", server.url], ["--local"], ["--help"],
                   ["--limit", "²"], ["--limit", "9" * 5000], ["--no-such-flag"]],
        "list": [["other.py"], [str(outside / "evil.py")], [f"../{outside.name}/evil.py"]],
        "stats": [["planted", str(outside / "evil.py")]],
        "logs": [["-f"], ["--follow"], ["--step", "x", "--server=http://127.0.0.1:9"]],
        "history": [["--server"], ["--", "--server"]],
        "doctor": [["other.py"], [str(outside / "evil.py")], ["--env", "other"]],
    }
    for command, cases in refused.items():
        for args in cases:
            got = server.get(f"/cli/{command}", params=[("arg", a) for a in args])
            assert got.status_code in (400, 404), (command, args, got.status_code, got.text)
            assert got.json()["error"], got.text
    for command in ("gc", "sql", "serve", "pool", "plan", "docs"):
        got = server.get(f"/cli/{command}")
        assert got.status_code == 404, (command, got.text)
    # a command naming no file reads the served files, not every file of the project
    for command in ("status", "list", "doctor"):
        got = server.get(f"/cli/{command}")
        assert got.status_code == 200 and got.json()["exit_code"] == 0, got.text
        assert "other.py" not in got.json()["stdout"]
    assert not (ran / "imported.marker").exists()  # no file it does not serve was imported
    assert not (outside / "imported.marker").exists()
    assert _ran(ran) == []


def _cli(root: Path, *args: str):
    return barca(root, *args).expect(0).json


def test_every_typed_read_route_answers_what_the_cli_prints(ran: Path, serve) -> None:
    barca(ran, "get", "raw", "p.py").expect(0)
    for name in ("published.log", "sensor.log"):
        (ran / name).unlink(missing_ok=True)
    server = serve(ran, "p.py", "--no-schedule")
    run_id = _cli(ran, "history")["runs"][-1]["run_id"]  # the oldest: the run of publish
    pairs = [
        ("/list", {}, ["list", "p.py"]),
        ("/list", {"limit": "1"}, ["list", "p.py", "--limit", "1"]),
        ("/nodes", {}, ["status", "p.py"]),
        ("/nodes", {"targets": "raw"}, ["status", "p.py:raw", "p.py"]),
        ("/nodes", {"limit": "2"}, ["status", "p.py", "--limit", "2"]),
        ("/history", {}, ["history"]),
        ("/history", {"limit": "1"}, ["history", "--limit", "1"]),
        ("/history", {"all": "1"}, ["history", "--all"]),
        (f"/history/{run_id[:6]}", {}, ["history", run_id]),
        (f"/history/{run_id}", {"limit": "1"}, ["history", run_id, "--limit", "1"]),
        ("/stats/raw", {}, ["stats", "raw", "p.py"]),
        ("/stats/p.py:publish", {}, ["stats", "publish", "p.py"]),
    ]
    for path, params, argv in pairs:
        got = server.get(path, params=params)
        assert got.status_code == 200, (path, params, got.text)
        assert got.headers["content-type"].startswith("application/json")
        assert got.json() == _cli(ran, *argv, "--json"), (path, params)
    assert server.get("/nodes", params={"limit": "2"}).json()["truncated"] is True
    assert _ran(ran) == []  # reading ran nothing

    assert server.get("/stats/nope").status_code == 404
    assert server.get("/nodes", params={"targets": "raw,nope"}).status_code == 404
    assert server.get("/history/0000000000ff").status_code == 404
    assert server.get("/nodes", params={"sample": "3"}).status_code == 400  # not a parameter


BAD_NUMBERS = ["²", "٣", "9" * 5000, "-1", "1.5", "1e3", " 1", "0x10", ""]


def test_bad_integers_are_400s_never_500s(ran: Path, serve) -> None:
    server = serve(ran, "p.py", "--no-schedule")
    for path in ("/list", "/nodes", "/history", "/runs", f"/history/{_run_of(ran)}"):
        for text in BAD_NUMBERS:
            got = server.get(path, params={"limit": text})
            assert got.status_code == 400, (path, text[:10], got.status_code, got.text[:300])
            assert "limit" in got.json()["error"] and len(got.text) < 1000
    for text in ("maybe", "2", "yes please"):
        got = server.get("/history", params={"all": text})
        assert got.status_code == 400, (text, got.text)
    offset = server.get("/runs", params={"offset": "²"})
    assert offset.status_code == 400, offset.text
    huge = server.get("/runs", params={"limit": "9" * 18})  # a count past the bound
    assert huge.status_code == 400 and "1..1000" in huge.json()["error"], huge.text
    events = server.get("/runs/0000000000ff/events", params={"after": "²"})
    assert events.status_code == 404, events.text  # an unknown run, not a crash


def _run_of(root: Path) -> str:
    return _cli(root, "history")["runs"][0]["run_id"]


def _normal(text: str, root: Path) -> str:
    return text.replace(str(root), "<root>")


def test_a_remote_dry_run_is_a_run_it_asks_for_with_post_runs(
        ran: Path, serve, tmp_path_factory) -> None:
    """Printed as the local command prints it, exit code included; refused by a read-only
    server (a dry run runs sensors), where `status` still answers."""
    local = write(tmp_path_factory.mktemp("local"), {"barca.toml": "", "p.py": PIPELINE})
    barca(local, "run", "publish", "p.py").expect(0)  # as the served project was
    writable = serve(ran, "p.py", "--no-schedule")
    for output in ("--json", "--pretty"):
        here = barca(local, "get", "raw", "p.py", "--dry-run", output)
        there = barca(local, "get", "raw", "p.py", "--dry-run", output, "--server",
                      writable.url)
        assert (here.code, there.code) == (0, 0), (here, there)
        if output == "--json":
            assert json.loads(_normal(there.stdout, ran)) == \
                json.loads(_normal(here.stdout, local))
        else:
            assert _normal(there.stdout, ran) == _normal(here.stdout, local)
    # the dry runs observed the server's sensor: runs the client started, not a GET's doing
    assert lines(ran / "sensor.log") == ["observed", "observed"]
    refused = barca(local, "get", "raw", "--dry-run", "--batch", "bogus", "--server",
                    writable.url)
    assert refused.code == 2 and "bogus" in refused.envelope["error"]
    writable.stop()
    (ran / "sensor.log").unlink()

    local_status = _normal(barca(ran, "status", "p.py").expect(0).stdout, ran)
    read_only = serve(ran, "p.py", "--read-only")
    before = _listing(ran)
    out = barca(local, "get", "raw", "p.py", "--dry-run", "--server", read_only.url)
    assert out.code == 2, out
    assert "read-only" in out.envelope["error"]
    status = barca(local, "status", "p.py", "--server", read_only.url)
    assert status.code == 0, status
    assert _normal(status.stdout, ran) == local_status
    assert _ran(ran) == [] and _listing(ran) == before

