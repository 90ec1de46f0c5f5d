"""`--server URL`: the same command, run against a `barca serve` of an identical project,
prints the same stdout JSON and `[barca]` lines and exits with the same code as run locally
(modulo run ids, timings and the project's path)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ServeProcess, barca, barca_env, poll, start_barca, write

PIPELINE = """
    import time
    from barca import asset, partitions, task

    @asset()
    def raw() -> dict:
        print("raw ran")
        return {"a": 1}

    @asset(partitions={"k": partitions(["x", "y"])}, inputs={"raw": raw})
    def part(k: str, raw: dict) -> int:
        return len(k) + raw["a"]

    @asset(inputs={"raw": raw})
    def broken(raw: dict) -> int:
        raise ValueError("boom")

    @asset()
    def slow() -> int:
        time.sleep(60)
        return 1

    @asset(partitions={"k": partitions([str(i) for i in range(1000)])}, batch="all")
    def wide(k: list[str]) -> dict:
        return {key: "v" * 400 for key in k}

    @task(inputs={"raw": raw})
    def publish(raw: dict) -> None:
        print("published")

    @asset()
    def gated() -> int:
        import pathlib
        print("started", flush=True)
        go = pathlib.Path(__file__).parent / "go"  # the test lets it end
        while not go.exists():
            time.sleep(0.05)
        print("done", flush=True)
        return 2
"""

VOLATILE = {"elapsed_seconds", "metadata_seconds", "started_at", "finished_at", "created_at",
            "max_rss_bytes", "avg_elapsed_seconds", "median_elapsed_seconds",
            "p95_elapsed_seconds", "max_elapsed_seconds", "ts", "elapsed", "traceback",
            "peak_rss_bytes", "rss_bytes", "median_max_rss_bytes", "p95_max_rss_bytes",
            "import_seconds", "load_seconds", "compute_seconds", "split_seconds", "write_seconds",
            "cpu_seconds",
            "triggered_by"}  # by design: a run started through the server is the server's (api)
# a small result's place in a pack: the pack's name is random, its grouping depends on timing
PACKED = re.compile(r"[0-9a-f]{16}\.pack@\d+:\d+")
RUN_ID = re.compile(r"\b[0-9a-f]{12}\b")
SECONDS = re.compile(r"\d+(\.\d+)?s\b")
DONE = re.compile(r"\(\d+/(\d+)\)")  # (done/total): parallel steps finish in any order


def normal(value, root: Path):
    if isinstance(value, dict):
        return {k: None if k in VOLATILE else normal(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [normal(v, root) for v in value]
    if isinstance(value, str):
        return PACKED.sub("<packed>", RUN_ID.sub("<id>", value.replace(str(root), "<root>")))
    return value


def normal_lines(text: str, root: Path) -> list[str]:
    out = []
    for line in text.splitlines():
        if line.startswith("{"):  # the JSON error envelope
            out.append(json.dumps(normal(json.loads(line), root), sort_keys=True))
        elif line.startswith("[") and not line.startswith("[barca] server "):
            line = RUN_ID.sub("<id>", line.replace(str(root), "<root>"))
            out.append(DONE.sub(r"(n/\1)", SECONDS.sub("Ns", line)))
    return out


@pytest.fixture
def pair(tmp_path: Path):
    local, served = tmp_path / "local", tmp_path / "served"
    for root in (local, served):
        write(root, {"barca.toml": "", "p.py": PIPELINE})
    server = ServeProcess(served, ("p.py", "--no-schedule"))
    yield local, served, server
    if server.proc.returncode is None:  # not killed by the test
        server.stop()  # SIGTERM: exit 0 within 10 s


def both(pair, *args, code: int):
    local, served, server = pair
    here = barca(local, *args)
    there = barca(local, *args, "--server", server.url)
    assert (here.code, there.code) == (code, code), (here, there)
    here_out = normal(json.loads(here.stdout), local) if here.stdout.strip() else None
    there_out = normal(json.loads(there.stdout), served) if there.stdout.strip() else None
    assert here_out == there_out
    # the same lines; steps that run in parallel may finish in another order
    assert sorted(normal_lines(here.stderr, local)) == sorted(normal_lines(there.stderr, served))
    return here, there


def test_get_run_and_inspection_print_the_same_through_a_server(pair):
    both(pair, "get", "raw", "p.py", code=0)  # cold
    both(pair, "get", "raw", "p.py", code=0)  # warm
    both(pair, "get", "part", "p.py", "--dry-run", code=0)
    both(pair, "get", "part", "p.py", "--agent", code=0)
    failed, _ = both(pair, "get", "broken", "p.py", code=1)
    assert "boom" in failed.stderr
    unknown, _ = both(pair, "get", "nope", "p.py", code=2)
    assert "nope" in unknown.envelope["error"]
    both(pair, "get", "part", "p.py", "--batch", "bogus", code=2)
    both(pair, "run", "publish", "p.py", code=0)
    both(pair, "status", "p.py", code=0)
    both(pair, "list", "p.py", code=0)
    both(pair, "history", code=0)
    both(pair, "stats", "raw", "p.py", code=0)
    local, served, server = pair
    here = barca(local, "history", "--limit", "1").json["runs"][0]["run_id"]
    there = barca(served, "history", "--limit", "1").json["runs"][0]["run_id"]
    a = barca(local, "history", here)
    b = barca(local, "history", there, "--server", server.url)
    assert (a.code, normal(a.json, local)) == (b.code, normal(b.json, served))
    a = barca(local, "logs", here)
    b = barca(local, "logs", there, "--server", server.url)
    assert (a.code, a.stdout) == (b.code, b.stdout) == (0, "[p.py:publish] published\n")


def test_an_output_too_large_for_an_event_is_printed_whole(pair):
    here, there = both(pair, "get", "wide", "p.py", code=0)
    assert len(there.stdout) > 256 * 1024  # over what the last event carries
    assert len(json.loads(there.stdout)["final_output"]) == 1000


def test_an_unreachable_server_is_exit_3_naming_it_and_the_way_out(tmp_path):
    write(tmp_path, {"barca.toml": "", "p.py": PIPELINE})
    out = barca(tmp_path, "get", "raw", "p.py", "--server", "http://127.0.0.1:9").expect(3)
    assert "http://127.0.0.1:9" in out.envelope["error"]
    assert "--local" in out.envelope["remediation"]
    env = {"BARCA_SERVER": "http://127.0.0.1:9"}
    barca(tmp_path, "get", "raw", "p.py", "--local", env=env).expect(0)  # --local wins
    for command in (("sql", "select 1"), ("doctor",)):  # they go to the server too
        out = barca(tmp_path, *command, "--server", "http://127.0.0.1:9").expect(3)
        assert "http://127.0.0.1:9" in out.envelope["error"]


def test_ctrl_c_on_a_remote_get_cancels_the_run_on_the_server(pair):
    local, served, server = pair
    proc = start_barca(local, "get", "slow", "p.py", "--server", server.url)
    # running as the server's records say (`barca history` there), not as GET /runs says the
    # moment the server accepts the run: a Ctrl-C that early was seen to leave it running
    poll(lambda: _recorded_running(served), "the remote run to start")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    runs = barca(served, "history").json["runs"]
    assert runs[0]["target"].endswith("slow") and runs[0]["status"] == "cancelled"


def test_ctrl_c_the_moment_the_server_accepted_the_run_still_cancels_it(pair):
    """A Ctrl-C as soon as the server lists the run (the client may not have read the
    server's answer yet) cancels it: it once left the run running, and the server waiting
    for it past its drain."""
    local, served, server = pair
    proc = start_barca(local, "get", "slow", "p.py", "--server", server.url)
    server.wait_run(lambda r: r["target"].endswith("slow"), "the server to accept the run")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, (proc.returncode, err)
    run = server.wait_run(lambda r: r["status"] != "running", "the run to stop", timeout=20)
    assert run["status"] == "cancelled", run


def test_ctrl_c_in_a_python_get_on_a_server_cancels_the_run_there(pair):
    local, served, server = pair
    script = ("import barca\n"
              f"barca.get('slow', 'p.py', server={server.url!r})\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=local, env=barca_env(None),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    server.wait_run(lambda r: r["target"].endswith("slow"), "the server to accept the run")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert "barca.errors.Cancelled" in err, (proc.returncode, err)  # as a local run raises
    run = server.wait_run(lambda r: r["status"] != "running", "the run to stop", timeout=20)
    assert run["status"] == "cancelled", run


def _recorded_running(root: Path) -> bool:
    out = barca(root, "history")
    return out.code == 0 and any(r["status"] == "running" for r in out.json["runs"])


def _running(server: ServeProcess) -> bool:
    """A run of the server is running, as its GET /runs says (the server's records, which
    `barca history` in its project prints), asked of the server rather than of a new
    `barca` process each poll."""
    return any(r["status"] == "running" for r in server.runs())


# -- every command, every output option ------------------------------------------------------

def test_value_path_and_fields_print_the_same_through_a_server(pair):
    local, served, server = pair
    both(pair, "get", "part", "p.py", "-o", "value", code=0)
    both(pair, "get", "raw", "p.py", "-o", "value", code=0)
    both(pair, "get", "part", "p.py", "--json", "-o", "value", code=0)
    both(pair, "get", "part", "p.py", "--fields", "id,status", code=0)
    both(pair, "get", "part", "p.py", "--dry-run", "--fields", "id,action", code=0)
    both(pair, "get", "part", "p.py", "--fields", "bogus", code=2)
    both(pair, "get", "raw", "p.py", "--expires", "1h", code=2)
    both(pair, "get", "part", "p.py", "-o", "path", "--dry-run", code=2)
    # the server's files, absolute: the client is never in the server's project
    here = barca(local, "get", "part", "p.py", "-o", "path").expect(0)
    there = barca(local, "get", "part", "p.py", "-o", "path", "--server", server.url).expect(0)
    assert ["<root>/" + p for p in normal(here.stdout.split(), local)] == \
        normal(there.stdout.split(), served)
    assert all(Path(p.partition("@")[0]).is_file() for p in there.stdout.split())
    out = barca(local, "get", "raw", "p.py", "-o", "url", "--server", server.url).expect(2)
    assert "--server" in out.envelope["error"]


def test_sql_queries_the_views_the_server_locates(pair):
    local, served, server = pair
    for root in (local, served):
        barca(root, "get", "part", "p.py").expect(0)
    both(pair, "sql", "select * from part order by partition", code=0)
    both(pair, "sql", "select * from raw", "p.py", code=0)
    both(pair, "sql", "show tables", code=0)
    both(pair, "sql", "select * from broken", code=2)  # no result yet: said as here
    both(pair, "sql", "select * from nope", code=2)
    local, _, server = pair  # a file the server does not serve: refused, in its words
    assert barca(local, "sql", "select 1", "other.py", "--server", server.url).code == 2


def test_doctor_runs_the_servers_checks(pair):
    local, served, server = pair
    here = barca(local, "doctor").expect(0).json
    there = barca(local, "doctor", "--server", server.url).expect(0).json
    assert [(c["name"], c["ok"]) for c in here["checks"]] == \
        [(c["name"], c["ok"]) for c in there["checks"]]
    project = {c["name"]: c for c in there["checks"]}["project"]
    assert project["data"]["root"] == str(served)  # the server's project, not this one
    barca(local, "doctor", "other.py", "--server", server.url).expect(2)


def test_logs_follow_follows_a_run_of_the_server(pair):
    local, served, server = pair
    (local / "go").touch()
    barca(local, "get", "gated", "p.py").expect(0)
    getter = start_barca(local, "get", "gated", "p.py", "--server", server.url)
    poll(lambda: _running(server), "the server's run to start")
    follower = Lines(start_barca(local, "logs", "-f", "--server", server.url))
    follower.wait_for("[p.py:gated] started", "the follower to print the first line")
    (served / "go").touch()
    assert follower.wait() == 0, follower.text()
    assert getter.wait(timeout=60) == 0
    here = barca(local, "logs", "-f")
    assert here.code == 0 and follower.stdout() == here.stdout.splitlines() == [
        "[p.py:gated] started", "[p.py:gated] done"]
    # a failed run: the same lines and exit code; what --follow refuses, refused the same
    for root in (local, served):
        barca(root, "get", "broken", "p.py").expect(1)
    a = barca(local, "logs", "-f", "--json")
    b = barca(local, "logs", "-f", "--json", "--server", server.url)
    assert (a.code, b.code) == (1, 1), (a, b)
    assert [normal(json.loads(x), local) for x in a.stdout.splitlines()] == \
        [normal(json.loads(x), served) for x in b.stdout.splitlines()]
    assert barca(local, "logs", "-f", "--pretty", "--server", server.url).code == 2
    assert barca(local, "logs", "nope", "-f", "--server", server.url).code == 2


def test_a_dropped_stream_is_followed_again(pair):
    local, served, server = pair
    with Proxy(server.port) as proxy:
        client = Lines(start_barca(local, "get", "gated", "p.py", "--server", proxy.url))
        client.wait_for("[p.py:gated] started", "the run's first line")
        proxy.cut()  # the stream drops mid-run; the client follows the same run again
        (served / "go").touch()
        assert client.wait() == 0, client.text()
        assert json.loads("\n".join(client.out))["final_output"] == 2
        assert proxy.connections >= 2  # a new connection after the cut


def test_a_run_that_ends_while_its_stream_is_down_is_still_printed_whole(pair):
    """The run ends (its record says so) before the client reaches the server again: the
    client follows the run's events again for its end, which holds the command's stdout,
    rather than rebuilding an end without it from the record."""
    local, served, server = pair
    with Proxy(server.port) as proxy:
        client = Lines(start_barca(local, "get", "gated", "p.py", "--server", proxy.url))
        client.wait_for("[p.py:gated] started", "the run's first line")
        proxy.pause()
        proxy.cut()
        (served / "go").touch()
        # asked of the server itself (its own port, not the paused proxy)
        poll(lambda: server.runs()[0]["status"] == "success", "the run to end on the server")
        proxy.resume()
        assert client.wait() == 0, client.text()
        assert json.loads("\n".join(client.out))["final_output"] == 2, client.text()


def test_a_stream_lost_past_the_reconnect_window_is_exit_3_naming_the_run(pair):
    local, served, server = pair
    client = Lines(start_barca(local, "get", "gated", "p.py", "--server", server.url,
                               env={"BARCA_SERVER_RECONNECT": "0"}))
    client.wait_for("[p.py:gated] started", "the run's first line")
    run_id = barca(served, "history").json["runs"][0]["run_id"]
    server.kill()  # the server and its run, at once
    assert client.wait() == 3, client.text()
    error = json.loads(client.err[-1])
    assert run_id in error["error"] and "BARCA_SERVER_RECONNECT" in error["remediation"]
    bad = barca(local, "get", "raw", "p.py", "--server", server.url,
                env={"BARCA_SERVER_RECONNECT": "soon"})  # refused before it asks the server
    assert bad.code == 2 and "BARCA_SERVER_RECONNECT" in bad.envelope["error"]


def test_the_python_api_runs_on_a_server(pair):
    local, served, server = pair
    script = f"""
import json, barca
from barca.errors import StepFailed, UsageError
out = {{"raw": barca.get("raw", "p.py", server={server.url!r}),
       "part": barca.get("part", "p.py", server=True),
       "x": barca.get("part", "p.py", server=True, partition={{"k": "x"}}),
       "task": barca.run("publish", "p.py", server=True)}}
for name, kind in (("broken", StepFailed), ("nope", UsageError)):
    try:
        barca.get(name, "p.py", server=True)
    except kind as exc:
        out[name] = exc.exit_code
print(json.dumps(out))
"""
    (local / "drive.py").write_text(script)
    import subprocess
    import sys
    from conftest import barca_env
    proc = subprocess.run([sys.executable, "drive.py"], cwd=local, capture_output=True,
                          text=True, timeout=120, env=barca_env({"BARCA_SERVER": server.url}))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"raw": {"a": 1}, "part": {"k=x": 2, "k=y": 2}, "x": {"k=x": 2},
                   "task": None, "broken": 1, "nope": 2}
    assert not (local / ".barca").exists()  # it all ran there
    runs = barca(served, "history").json["runs"]
    assert {r["triggered_by"] for r in runs} == {"api"}


class Lines:
    """A started command's stdout and stderr lines, read as they come."""

    def __init__(self, proc) -> None:
        import threading

        self.proc, self.out, self.err = proc, [], []
        self.readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                        for stream, into in ((proc.stdout, self.out), (proc.stderr, self.err))]
        for reader in self.readers:
            reader.start()

    @staticmethod
    def _read(stream, into: list) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for(self, line: str, what: str) -> None:
        poll(lambda: line in self.out + self.err or self.proc.poll() is not None, what)
        assert line in self.out + self.err, self.text()

    def wait(self, timeout: float = 60) -> int:
        """The exit code, once the command has ended and all it printed has been read (the
        readers may still hold its last lines when the process is gone)."""
        code = self.proc.wait(timeout=timeout)
        for reader in self.readers:
            reader.join(timeout)
        return code

    def stdout(self) -> list[str]:
        self.wait()
        return self.out

    def text(self) -> str:
        return "stdout:\n" + "\n".join(self.out) + "\nstderr:\n" + "\n".join(self.err)


class Proxy:
    """A TCP relay on loopback to the server's port, whose open connections `cut()` closes
    (a dropped stream, as a network or a load balancer drops one)."""

    def __init__(self, port: int) -> None:
        import socket
        import threading

        self.target, self.pairs, self.connections = port, [], 0
        self.open = threading.Event()  # cleared: new connections wait (`pause`)
        self.open.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            self.open.wait()
            far = socket.create_connection(("127.0.0.1", self.target))
            self.pairs.append((near, far))
            self.connections += 1
            for a, b in ((near, far), (far, near)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(2)
            except OSError:
                pass

    def pause(self) -> None:
        """Hold new connections until `resume` (the server is out of reach for a while)."""
        self.open.clear()

    def resume(self) -> None:
        self.open.set()

    def cut(self) -> None:
        for near, far in self.pairs:
            for s in (near, far):
                try:
                    s.shutdown(2)
                except OSError:
                    pass
        self.pairs = []

    def __enter__(self) -> "Proxy":
        return self

    def __exit__(self, *exc) -> None:
        self.cut()
        self.listener.close()
