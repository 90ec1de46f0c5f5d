"""A machine that names a server as its ledger (`[server] url` in barca.toml or BARCA_SERVER):
every way into a get (the command, its quick kept answer, barca.get in Python) asks the
server's ledger, never a local answer; a local copy that is not the ledger's bytes is fetched
again; and `--env` with `--server` must be the server's. Real `barca serve` on loopback, a
real S3 endpoint (moto's server mode through s3fs), the real CLI.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from conftest import Moto, barca, barca_env, poll, require_moto, start_barca, write

require_moto()

DOWN = "http://127.0.0.1:9"  # nothing listens there

PLAIN = """
from barca import asset

@asset
def numbers() -> list:
    return list(range(10))
"""


def _remote(bucket: str) -> str:
    return f'[remote]\nuri = "s3://{bucket}/team"\n'


def test_a_kept_answer_is_not_given_when_barca_toml_names_a_server(tmp_path: Path,
                                                                   moto: Moto) -> None:
    """A `--local` get keeps its answer (a fact of this machine's records); a plain get with
    `[server] url` set goes to the server all the same, as with BARCA_SERVER: here it cannot
    be reached, which is exit 3 naming it, never the kept local answer."""
    toml = _remote(moto.bucket()) + f'[server]\nurl = "{DOWN}"\n'
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": toml})
    for _ in range(2):  # the second is answered from the answer the first kept
        local = barca(root, "get", "numbers", "pipeline.py", "--local", env=moto.env).expect(0)
        assert local.json["final_output"] == list(range(10))
    assert list((root / ".barca" / "answers").glob("*.answer"))  # the answer it kept
    bad = barca(root, "get", "numbers", "pipeline.py", env=moto.env).expect(3)
    assert DOWN in bad.envelope["error"], bad.stderr
    assert f"[barca] server {DOWN} ([server] url)" in bad.stderr


MARKED = """
from barca import asset

@asset
def numbers() -> list:
    open("computed", "a").write("numbers\\n")
    return list(range(10))
"""


def _python(root: Path, script: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                          text=True, timeout=120, env=barca_env(env))


def test_barca_get_in_python_runs_against_the_configured_servers_ledger(
        tmp_path: Path, moto: Moto, serve) -> None:
    """`barca.get` where barca.toml names a server runs here and asks the server's ledger,
    as `barca get` does: its run is recorded there, and another machine's `barca.get`
    (BARCA_SERVER) computes nothing. `server=True` still runs on the server itself."""
    bucket = moto.bucket()
    served = write(tmp_path / "server", {"pipeline.py": MARKED, "barca.toml": _remote(bucket)})
    server = serve(served, "pipeline.py", "--no-schedule", env=moto.env)
    a = write(tmp_path / "a", {"pipeline.py": MARKED, "barca.toml": _remote(bucket)
                               + f'[server]\nurl = "{server.url}"\n'})
    b = write(tmp_path / "b", {"pipeline.py": MARKED, "barca.toml": _remote(bucket)})
    get = 'import barca; print(barca.get("numbers", "pipeline.py"))'

    first = _python(a, get, moto.env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == str(list(range(10)))
    assert (a / "computed").exists()  # it ran here
    recorded = [r for r in server.runs() if r.get("triggered_by") == "client"]
    assert len(recorded) == 1, server.runs()

    second = _python(b, get, {**moto.env, "BARCA_SERVER": server.url})
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == str(list(range(10)))
    assert not (b / "computed").exists()  # the ledger's hit, fetched from the store

    # server=False: this machine's records only (a has its own: cached, the server is not
    # asked); server=True: a run on the server (cached there too: its ledger holds a's)
    local = _python(a, 'import barca; print(barca.get("numbers", "pipeline.py", '
                       'server=False))', {**moto.env, "BARCA_SERVER": DOWN})
    assert local.returncode == 0, local.stderr
    there = _python(b, 'import barca; print(barca.get("numbers", "pipeline.py", '
                       'server=True))', {**moto.env, "BARCA_SERVER": server.url})
    assert there.returncode == 0, there.stderr
    assert there.stdout.strip() == str(list(range(10)))
    assert {r.get("triggered_by") for r in server.runs()} == {"client", "api"}


def test_env_with_server_must_be_the_servers_environment(tmp_path: Path, serve) -> None:
    """`--env` with `--server` names the environment the server serves, or is exit 2 naming
    both (before anything runs there); the server's own is accepted and runs as without."""
    served = write(tmp_path / "server", {"pipeline.py": PLAIN})
    server = serve(served, "pipeline.py", "--no-schedule", "--env", "prod")
    here = write(tmp_path / "here", {"pipeline.py": PLAIN})
    for args in (["get", "numbers", "pipeline.py"], ["status", "pipeline.py"]):
        bad = barca(here, *args, "--server", server.url, "--env", "dev").expect(2)
        error = bad.envelope["error"]
        assert "--env dev" in error and "prod" in error and server.url in error, error
    assert server.runs() == []  # nothing started there
    got = barca(here, "get", "numbers", "pipeline.py", "--server", server.url,
                "--env", "prod").expect(0)
    assert got.json["final_output"] == list(range(10))
    status = barca(here, "status", "pipeline.py", "--server", server.url,
                   "--env=prod").expect(0).json
    assert [n["name"] for n in status["nodes"]] == ["numbers"]
    assert not (here / ".barca").exists()  # it all ran there


HEAVY = """
import os, time
from pathlib import Path
from barca import asset

MARKS = Path({marks!r})

@asset(weight=2)
def heavy() -> int:
    me = MARKS / f"running-{{os.getpid()}}"
    if list(MARKS.glob("running-*")):
        (MARKS / f"overlap-{{os.getpid()}}").touch()
    me.touch()
    while not (MARKS / f"go-{{os.getpid()}}").exists():
        time.sleep(0.02)
    me.unlink()
    return 1
"""


def _running(marks: Path) -> list[Path]:
    return sorted(marks.glob("running-*"))


def _go(step: Path) -> None:
    (step.parent / step.name.replace("running-", "go-")).touch()


def test_clients_that_share_the_servers_capacity_are_admitted_one_at_a_time(
        tmp_path: Path, moto: Moto, serve) -> None:
    """Two machines with `[server] shared_capacity = true` whose step takes the server's whole
    `--capacity`: the second one's step waits in the server's line (GET /queue shows it)
    until the first one's ended, then runs; they never run at once."""
    bucket = moto.bucket()
    marks = tmp_path / "marks"
    marks.mkdir()
    pipeline = HEAVY.format(marks=str(marks))
    served = write(tmp_path / "server", {"pipeline.py": pipeline, "barca.toml": _remote(bucket)})
    server = serve(served, "pipeline.py", "--no-schedule", "--capacity", "2", env=moto.env)
    toml = _remote(bucket) + f'[server]\nurl = "{server.url}"\nshared_capacity = true\n'
    a, b = (write(tmp_path / name, {"pipeline.py": pipeline, "barca.toml": toml})
            for name in ("a", "b"))

    first = start_barca(a, "get", "heavy", "pipeline.py", env=moto.env)
    step_a = poll(lambda: _running(marks) or first.poll() is not None, "a's step to start")
    assert first.poll() is None, first.communicate()
    capacity = server.get("/queue").json()["capacity"]
    assert (capacity["in_use"], capacity["waiting"]) == (2, []), capacity
    second = start_barca(b, "get", "heavy", "pipeline.py", env=moto.env)
    waiting = poll(lambda: server.get("/queue").json()["capacity"]["waiting"]
                   or second.poll() is not None, "b's step to wait for the capacity")
    assert second.poll() is None, second.communicate()
    assert [w["weight"] for w in waiting] == [2]
    assert _running(marks) == step_a  # a's alone

    _go(step_a[0])
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    step_b = poll(lambda: _running(marks) or second.poll() is not None, "b's step to start")
    assert second.poll() is None, second.communicate()
    _go(step_b[0])
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert json.loads(out)["steps_executed"] == 1
    assert not list(marks.glob("overlap-*"))
    assert server.get("/queue").json()["capacity"] == {
        "total": 2, "source": "--capacity", "in_use": 0, "runs": [], "waiting": []}


def test_a_lease_of_a_client_killed_while_it_holds_the_capacity_expires(
        tmp_path: Path, moto: Moto, serve) -> None:
    """A client killed with -9 while its step holds the server's whole capacity gives nothing
    back; its lease does, once the server has not heard from it for its lease_seconds, and
    the other client's step runs. A server without --capacity is refused before any step."""
    bucket = moto.bucket()
    marks = tmp_path / "marks"
    marks.mkdir()
    pipeline = HEAVY.format(marks=str(marks))
    served = write(tmp_path / "server", {"pipeline.py": pipeline, "barca.toml": _remote(bucket)})
    server = serve(served, "pipeline.py", "--no-schedule", "--capacity", "2", env=moto.env)
    toml = _remote(bucket) + f'[server]\nurl = "{server.url}"\nshared_capacity = true\n'
    a, b = (write(tmp_path / name, {"pipeline.py": pipeline, "barca.toml": toml})
            for name in ("a", "b"))

    first = start_barca(a, "get", "heavy", "pipeline.py", env=moto.env,
                        start_new_session=True)
    step_a = poll(lambda: _running(marks), "a's step to start")
    second = start_barca(b, "get", "heavy", "pipeline.py", env=moto.env)
    poll(lambda: server.get("/queue").json()["capacity"]["waiting"], "b's step to wait")
    os.killpg(first.pid, signal.SIGKILL)  # the command and its workers
    first.wait(timeout=30)
    step_a[0].unlink(missing_ok=True)  # a's worker is gone with it
    step_b = poll(lambda: _running(marks) or second.poll() is not None, "b's step to start",
                  timeout=60)
    assert second.poll() is None, second.communicate()
    _go(step_b[0])
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err

    plain = write(tmp_path / "plain", {"pipeline.py": pipeline, "barca.toml": _remote(bucket)})
    uncapped = serve(plain, "pipeline.py", "--no-schedule", env=moto.env)
    c = write(tmp_path / "c", {"pipeline.py": pipeline, "barca.toml": _remote(bucket)
                               + f'[server]\nurl = "{uncapped.url}"\nshared_capacity = true\n'})
    bad = barca(c, "get", "heavy", "pipeline.py", env=moto.env).expect(2)
    assert "shared_capacity" in bad.envelope["error"] and "--capacity" in \
        bad.envelope["remediation"]
    assert not list(marks.glob("running-*"))


def test_a_local_copy_that_is_not_the_ledgers_result_is_fetched_again(
        tmp_path: Path, moto: Moto, serve) -> None:
    """A ledger hit whose result b has a local copy of, with no record of it here (b's
    records were reset, its files kept; or a run here wrote it and never recorded it), and
    other bytes: the get sees they are not the ledger's digest and fetches the store's
    object again, instead of serving them."""
    bucket = moto.bucket()
    served = write(tmp_path / "server", {"pipeline.py": PLAIN, "barca.toml": _remote(bucket)})
    server = serve(served, "pipeline.py", "--no-schedule", env=moto.env)
    env = {**moto.env, "BARCA_SERVER": server.url}
    a, b = (write(tmp_path / name, {"pipeline.py": PLAIN, "barca.toml": _remote(bucket)})
            for name in ("a", "b"))
    barca(a, "get", "numbers", "pipeline.py", env=env).expect(0)
    first = barca(b, "get", "numbers", "pipeline.py", env=env).expect(0).json
    assert first["steps_executed"] == 0 and first["final_output"] == list(range(10))
    copies = list((b / ".barca" / "artifacts").rglob("*.json"))
    assert len(copies) == 1, copies
    copies[0].write_text("[1]")
    barca(b, "state", "reset", "--yes", env=env).expect(0)  # its files stay
    again = barca(b, "get", "numbers", "pipeline.py", env=env).expect(0).json
    assert again["steps_executed"] == 0
    assert again["final_output"] == list(range(10))
    assert json.loads(copies[0].read_text()) == list(range(10))


SLOW = """
import os, time
from barca import asset

@asset
def total() -> int:
    open("total.started", "w").close()
    while not os.path.exists("go"):
        time.sleep(0.05)
    return 45
"""


def test_history_and_status_send_the_kept_posts_before_the_server_answers(
        tmp_path: Path, moto: Moto, serve) -> None:
    """A post the server missed (it stopped while the step ran) is kept; the next `history`
    with the configured server sends it first, so the server's answer holds the run; the
    next `status` has nothing left to send."""
    bucket = moto.bucket()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    served = write(tmp_path / "server", {"pipeline.py": SLOW, "barca.toml": _remote(bucket)})
    a = write(tmp_path / "a", {"pipeline.py": SLOW, "barca.toml": _remote(bucket)
                               + f'[server]\nurl = "{url}"\n'})
    server = serve(served, "pipeline.py", "--no-schedule", env=moto.env, port=port)
    proc = start_barca(a, "get", "total", "pipeline.py", env=moto.env)
    poll(lambda: (a / "total.started").exists(), "the step to start")
    server.terminate()
    (a / "go").touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    run_id = json.loads(out)["run_id"]
    assert f"run {run_id} was not recorded on the server {url}" in err

    server = serve(served, "pipeline.py", "--no-schedule", env=moto.env, port=port)
    history = barca(a, "history", env=moto.env).expect(0)
    assert f"[barca] recorded run {run_id} on the server (run {run_id})" in history.stderr
    assert history.stderr.index(f"[barca] server {url}") < history.stderr.index("recorded run")
    assert run_id in {r["run_id"] for r in history.json["runs"]}  # the server's answer
    status = barca(a, "status", "pipeline.py", env=moto.env).expect(0)
    assert "recorded run" not in status.stderr
    assert [n["name"] for n in status.json["nodes"]] == ["total"]
