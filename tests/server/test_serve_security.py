"""`barca serve` against a hostile browser page, another local user and a careless script
(issue 26, items 2-4): each case on a real server over loopback, with the side effects a
request could cause counted in files the pipeline writes. The cases whose every request must
be refused or only reads share one server of the module (`shared`), which then never starts a
run; the others start their own."""

from __future__ import annotations

import socket
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from conftest import CLI, ServeProcess, barca, barca_env, poll, write

PIPELINE = """
    from pathlib import Path
    from barca import asset, sensor, task

    @asset()
    def source() -> int:
        with open("source.calls", "a") as f:
            f.write("x")
        return 1

    @asset(inputs={"source": source})
    def summary(source: int) -> int:
        return source + 1

    @task(inputs={"summary": summary})
    def publish(summary: int) -> None:
        with open("publish.calls", "a") as f:
            f.write("x")
"""

TOKEN = "s3cret-token-0123456789"


@pytest.fixture
def project_with_pipeline(project: Path) -> Path:
    return write(project, {"p.py": PIPELINE})


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """`barca serve p.py` on a project of the pipeline, for the tests whose requests must all
    be refused or only read: they check that no run started (GET /runs) and no step ran (the
    .calls files) on it, whichever of them ran before. SIGTERM at the end: exit 0."""
    server = ServeProcess(write(tmp_path_factory.mktemp("shared"), {
        "barca.toml": "", "p.py": PIPELINE}), ("p.py",))
    yield server
    server.stop()


def calls(root: Path, name: str) -> int:
    path = root / f"{name}.calls"
    return len(path.read_text()) if path.exists() else 0


def raw(server, method: str, path: str, headers: dict | None = None, **kw) -> httpx.Response:
    """A request with exactly these headers (no client defaults but Host)."""
    with httpx.Client(base_url=server.url, timeout=30) as client:
        return client.request(method, path, headers=headers or {}, **kw)


# -- item 2: cross-site requests and DNS rebinding ---------------------------------------------

@pytest.mark.parametrize("host", ["evil.example", "evil.example:8274", "127.0.0.1.nip.io"])
def test_a_host_name_that_is_not_this_server_is_refused(shared, host):
    """After DNS rebinding a page's own name points at 127.0.0.1: its requests carry it."""
    server = shared
    for method, path in [("GET", "/state"), ("GET", "/runs"), ("POST", "/get/summary")]:
        got = raw(server, method, path, {"Host": host})
        assert got.status_code == 421, (method, path, got.status_code, got.text)
        assert "--allow-host" in got.json()["remediation"]
    assert server.runs() == [] and calls(server.root, "source") == 0


def test_this_servers_own_names_and_allowed_hosts_are_answered(project_with_pipeline, serve):
    server = serve(project_with_pipeline, "p.py", "--allow-host", "barca.internal")
    for host in [f"127.0.0.1:{server.port}", f"localhost:{server.port}", "localhost",
                 "barca.internal", f"BARCA.internal:{server.port}"]:
        assert raw(server, "GET", "/runs", {"Host": host}).status_code == 200, host


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example", "Content-Type": "application/json"},
    {"Origin": "null", "Content-Type": "application/json"},
    {"Origin": "http://127.0.0.1.evil.example", "Content-Type": "application/json"},
    {"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"},
    {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site",
     "Content-Type": "application/json"},
], ids=["other-origin", "null-origin", "lookalike-origin", "sec-fetch-site", "other-port"])
def test_a_page_of_another_site_cannot_start_a_run(shared, headers):
    server = shared
    started = raw(server, "POST", "/runs", headers, content=b'{"targets": ["summary"]}')
    assert started.status_code == 403, started.text
    legacy = raw(server, "POST", "/run/publish", headers)
    assert legacy.status_code == 403, legacy.text
    assert server.runs() == []
    assert calls(server.root, "source") == calls(server.root, "publish") == 0


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", None])
def test_a_post_that_starts_a_run_takes_json_only(shared, content_type):
    """A plain HTML form or a `text/plain` fetch needs no preflight: neither may start a run."""
    server = shared
    headers = {"Content-Type": content_type} if content_type else {}
    body = b'{"targets": ["summary"]}' if content_type != "multipart/form-data; boundary=x" \
        else b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--x--\r\n"
    got = raw(server, "POST", "/runs", headers, content=body)
    assert got.status_code == 415, got.text
    form = raw(server, "POST", "/run/publish", headers, content=b"a=1")
    assert form.status_code == 415, form.text
    assert server.runs() == [] and calls(server.root, "publish") == 0


def test_scripts_and_the_same_origin_keep_working(project_with_pipeline, serve):
    """No Origin (curl, scripts) or this server's own origin (the UI): runs start."""
    server = serve(project_with_pipeline, "p.py")
    legacy = raw(server, "POST", "/get/summary")  # curl -X POST .../get/summary
    assert legacy.status_code == 200, legacy.text
    same = raw(server, "POST", "/runs", {"Origin": server.url, "Sec-Fetch-Site": "same-origin",
                                         "Content-Type": "application/json"},
               content=b'{"targets": ["publish"], "command": "run"}')
    assert same.status_code == 202, same.text
    server.wait_ended(same.json()["run_id"])
    assert calls(project_with_pipeline, "publish") == 1


def test_a_page_of_another_site_cannot_cancel_a_run(project: Path, serve):
    write(project, {"p.py": """
        import time
        from pathlib import Path
        from barca import asset

        @asset()
        def slow() -> int:
            Path("slow.started").write_text("1")
            while not Path("go").exists():
                time.sleep(0.02)
            return 1
    """})
    server = serve(project, "p.py")
    run_id = server.start_run({"targets": ["slow"]})
    poll(lambda: (project / "slow.started").exists(), "the slow step to start")
    refused = raw(server, "DELETE", f"/runs/{run_id}", {"Origin": "http://evil.example"})
    assert refused.status_code == 403
    (project / "go").write_text("1")
    assert server.wait_ended(run_id)["run"]["status"] == "success"


def test_preflight_is_refused_and_no_cors_headers_are_sent(shared):
    server = shared
    preflight = raw(server, "OPTIONS", "/runs", {
        "Origin": "http://evil.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert preflight.status_code >= 400
    assert not any(h.lower().startswith("access-control-allow") for h in preflight.headers)


@pytest.mark.parametrize("path", ["/ui/", "/health", "/runs", "/no/such/route"])
def test_no_page_can_frame_the_server(shared, path):
    server = shared
    got = raw(server, "GET", path)
    assert got.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in got.headers["content-security-policy"]


# -- item 3: authentication --------------------------------------------------------------------

def test_a_token_is_needed_for_everything_but_health_and_the_ui_files(project_with_pipeline,
                                                                     serve):
    server = serve(project_with_pipeline, "p.py", token=TOKEN)
    for path in ["/runs", "/state", "/assets", "/schedule", "/openapi.json"]:
        for headers in [{}, {"Authorization": "Bearer wrong-token-0123456789"},
                        {"Authorization": TOKEN}]:
            got = raw(server, "GET", path, headers)
            assert got.status_code == 401, (path, headers, got.status_code)
            assert got.headers["www-authenticate"].startswith("Bearer")
    refused = raw(server, "POST", "/get/summary")
    assert refused.status_code == 401 and calls(project_with_pipeline, "source") == 0
    assert raw(server, "GET", "/health").status_code == 200
    assert raw(server, "GET", "/ui/").status_code == 200
    ok = raw(server, "POST", "/get/summary", {"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    server.wait_ended(ok.json()["run_id"])
    assert calls(project_with_pipeline, "source") == 1
    assert TOKEN not in server.stderr


def test_the_cli_sends_barca_server_token(project_with_pipeline, serve):
    server = serve(project_with_pipeline, "p.py", token=TOKEN)
    refused = barca(project_with_pipeline, "get", "summary", "p.py", "--server", server.url)
    refused.expect(2)
    assert "token" in refused.envelope["error"]
    got = barca(project_with_pipeline, "get", "summary", "p.py", "--server", server.url,
                env={"BARCA_SERVER_TOKEN": TOKEN}).expect(0)
    assert got.json["final_output"] == 2
    status = barca(project_with_pipeline, "status", "p.py", "--server", server.url,
                   env={"BARCA_SERVER_TOKEN": TOKEN}).expect(0)
    assert {n["name"] for n in status.json["nodes"]} >= {"summary", "source"}


def test_the_token_can_come_from_barca_toml(project_with_pipeline, serve):
    write(project_with_pipeline, {"barca.toml": f'[serve]\ntoken = "{TOKEN}"\n'})
    (project_with_pipeline / "barca.toml").chmod(0o600)
    server = serve(project_with_pipeline, "p.py")
    assert raw(server, "GET", "/runs").status_code == 401
    assert raw(server, "GET", "/runs", {"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def _serve_exit(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "serve", "p.py", "--port", "0", *args], cwd=root,
                          env=barca_env(env), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("host", ["0.0.0.0", "::"])
def test_listening_beyond_loopback_needs_a_token(project_with_pipeline, host):
    done = _serve_exit(project_with_pipeline, "--host", host)
    assert done.returncode == 2, done.stderr
    assert "--token" in done.stderr and "--insecure-no-token" in done.stderr


def test_a_short_token_is_refused(project_with_pipeline):
    done = _serve_exit(project_with_pipeline, env={"BARCA_SERVE_TOKEN": "short"})
    assert done.returncode == 2 and "at least 16" in done.stderr


def test_insecure_no_token_listens_with_a_warning(project_with_pipeline, serve):
    server = serve(project_with_pipeline, "p.py", "--host", "0.0.0.0", "--insecure-no-token")
    assert "no token (--insecure-no-token)" in server.stderr
    assert raw(server, "GET", "/health").status_code == 200


# -- item 4: one request must not take the server down -----------------------------------------

def test_a_large_body_is_refused_before_it_is_read(project_with_pipeline, serve):
    server = serve(project_with_pipeline, "p.py")
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                     b"\r\nContent-Length: 104857600\r\n\r\n" + b"[" * 65536)
        answer = sock.recv(65536)  # answered without sending the other 99.9 MB
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    chunked = raw(server, "POST", "/runs", {"Content-Type": "application/json"},
                  content=iter([b"[" * 65536] * 40))  # 2.5 MB without Content-Length
    assert chunked.status_code == 413
    assert raw(server, "GET", "/health").status_code == 200


def test_oversized_targets_are_neither_matched_nor_echoed(shared):
    server = shared
    long_name = "summar" + "y" * 200_000
    for body in [{"targets": [long_name]}, {"targets": ["summary"] * 1000},
                 {long_name: 1}]:
        got = server.post("/runs", json=body)
        assert got.status_code == 400, got.text[:200]
        assert len(got.content) < 2000
    assert server.runs() == []


def test_half_sent_requests_are_not_held_forever(project_with_pipeline, serve):
    """A slowloris: connections that send half a request head, or half a body, and stall."""
    server = serve(project_with_pipeline, "p.py")
    heads = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(20)]
    for sock in heads:
        sock.sendall(b"GET /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    body = socket.create_connection(("127.0.0.1", server.port))
    body.sendall(b"POST /runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"tar")
    assert raw(server, "GET", "/health").status_code == 200  # others are still answered
    for sock in heads:
        sock.settimeout(60)
        assert sock.recv(1024) == b""  # closed by the server
        sock.close()
    body.settimeout(60)
    answer = body.recv(1024)
    assert answer.startswith(b"HTTP/1.1 408") or answer == b"", answer
    body.close()


def test_more_connections_than_the_cap_do_not_lock_out_a_client(project_with_pipeline, serve):
    server = serve(project_with_pipeline, "p.py")
    idle = []
    try:
        for _ in range(400):
            sock = socket.create_connection(("127.0.0.1", server.port))
            sock.sendall(b"GET / HTTP/1.1\r\n")
            idle.append(sock)
        got = raw(server, "GET", "/health")
        assert got.status_code == 200
    finally:
        for sock in idle:
            sock.close()


@pytest.mark.parametrize("query", ["limit=%C2%B2", "limit=" + "9" * 5000, "limit=-1",
                                   "offset=%D9%A3", "limit=1e3"])
def test_integer_parameters_take_ascii_digits_only(shared, query):
    server = shared
    got = raw(server, "GET", f"/runs?{query}")
    assert got.status_code == 400, (query, got.status_code, got.text[:200])
    assert "whole number" in got.json()["error"]


def test_an_odd_last_event_id_is_not_a_crash(project_with_pipeline, serve):
    server = serve(project_with_pipeline, "p.py")
    run_id = server.start_run({"targets": ["summary"]})
    server.wait_ended(run_id)
    for value in ["²", "9" * 5000, "-3"]:
        got = raw(server, "GET", f"/runs/{run_id}/events",
                  {"Last-Event-ID": value.encode("utf-8")})
        assert got.status_code in (200, 204), (value, got.status_code)


BLOCKING_SENSOR = """
    import time
    from pathlib import Path
    from barca import asset, sensor

    @sensor()
    def gate() -> int:
        Path("sensors").mkdir(exist_ok=True)
        Path("sensors", str(time.monotonic_ns())).write_text("1")
        while not Path("release").exists():
            time.sleep(0.02)
        return 1

    @asset(inputs={"gate": gate})
    def gated(gate: int) -> int:
        return gate
"""


def test_waiting_dry_runs_do_not_starve_other_requests(project: Path, serve):
    """Seven dry runs whose sensor blocks: each used to hold one of six shared threads while it
    waited, and GET /runs waited behind them until they ended."""
    write(project, {"p.py": BLOCKING_SENSOR})
    server = serve(project, "p.py")
    answers: list[int] = []

    def dry_run():
        with httpx.Client(base_url=server.url, timeout=120) as client:
            answers.append(client.post("/runs", json={"targets": ["gated"],
                                                      "dry_run": True}).status_code)
    threads = [threading.Thread(target=dry_run, daemon=True) for _ in range(7)]
    for thread in threads:
        thread.start()
    try:
        poll(lambda: (project / "sensors").is_dir() and any((project / "sensors").iterdir()),
             "a dry run's sensor to start")
        listed = server.get("/runs", timeout=30)  # answered while the sensors still block
        assert listed.status_code == 200
        assert not (project / "release").exists()
    finally:
        (project / "release").write_text("1")
        for thread in threads:
            thread.join(120)
    assert answers == [200] * 7
