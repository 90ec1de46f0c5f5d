"""The HTTP cases of the fuzz corpus (tests/reliability/fuzz_corpus.py, issue 26) on one real
`barca serve` over loopback.

Each case is sent alone on a fresh socket, exactly as the corpus writes it (raw bytes: no
client fixes a header up), eight at a time, and the reply read until the server closes the
connection. Each must end in a 4xx naming the cause in the JSON error envelope (or, for
garbage below HTTP, a 4xx of any body or a bare close), never a 5xx, a traceback or a wait
past the server's own deadlines; and after all of them the server still answers, has
printed no traceback and has run nothing: the one recorded run is still the only one, and
no step wrote to calls.log.
"""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import ServeProcess, barca, lines, stop_pools
from fuzz_corpus import HTTP_PIPELINE, HTTP_SEED, HttpCase, http_cases, http_problems

CASES = http_cases()
WAIT_SECONDS = 40.0  # past each of the server's deadlines (10 s for a head, 10 s for a body)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> ServeProcess:
    root = tmp_path_factory.mktemp("http")
    (root / "barca.toml").write_text("")
    (root / "p.py").write_text(HTTP_PIPELINE)
    barca(root, *HTTP_SEED).expect(0)
    served = ServeProcess(root, ("p.py",))
    yield served
    code = served.terminate()
    stop_pools(root)
    assert code == 0, f"barca serve exited {code} after SIGTERM:\n{served.stderr[-3000:]}"


def exchange(port: int, data: bytes, then_eof: bool) -> tuple[bytes, bool]:
    """Send `data` on a new connection (from a thread, so that an answer sent before the
    server has read everything is read at once) and read until the server closes it: (what
    it sent, whether the connection was still open after WAIT_SECONDS)."""
    received = b""
    deadline = time.monotonic() + WAIT_SECONDS
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT_SECONDS) as sock:
        def send() -> None:
            try:
                sock.sendall(data)
                if then_eof:
                    sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the server answered and closed before taking it all (a refusal)
        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        try:
            while True:
                sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = sock.recv(65536)
                if not chunk:
                    return received, False
                received += chunk
        except socket.timeout:
            return received, True
        except ConnectionResetError:
            return received, False
        finally:
            sender.join(WAIT_SECONDS)


@pytest.fixture(scope="module")
def answers(server: ServeProcess) -> dict[str, tuple[bytes, bool]]:
    run_id = server.runs()[0]["run_id"]
    with ThreadPoolExecutor(8) as pool:
        replies = pool.map(lambda case: exchange(server.port, case.request(server.port, run_id),
                                                 case.then_eof), CASES)
        return {case.id: reply for case, reply in zip(CASES, replies)}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_a_hostile_request_is_refused_naming_its_cause(case: HttpCase, answers):
    data, hung = answers[case.id]
    found = http_problems(case, data, hung)
    assert not found, f"{case.id}: {found}\nanswer:\n{data[:1500]!r}"


def test_the_server_outlives_every_case_and_ran_nothing(server: ServeProcess, answers):
    assert server.proc.poll() is None, server.stderr[-3000:]
    health = server.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    runs = server.runs()
    assert [r["target"] for r in runs] == ["summary"], runs
    assert sorted(lines(Path(server.root) / "calls.log")) == ["source", "summary"]
    assert "Traceback" not in server.stderr, server.stderr[-5000:]
