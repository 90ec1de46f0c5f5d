"""The server as the ledger: two project copies (two "machines": their own directory and
database) share one store, a real S3 endpoint on loopback (moto's server mode through s3fs),
and one `barca serve` with the same `[remote]` decides which results exist. Each copy runs its
`get` here; the server's ledger answers its lookups and records its runs.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Moto, barca, require_moto, start_barca, wait_for, write

require_moto()

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "keyed_partitions"
KEYS = 1000


def _machine(root: Path, toml: str) -> Path:
    """A copy of the seed's keyed example with its own warehouse of KEYS retailers."""
    root.mkdir()
    shutil.copy(EXAMPLE / "pipeline.py", root / "pipeline.py")
    (root / "barca.toml").write_text(toml)
    _warehouse(root, "build", str(KEYS))
    return root


def _warehouse(root: Path, *args: str) -> None:
    subprocess.run([sys.executable, str(EXAMPLE / "warehouse.py"), *args], cwd=root,
                   check=True, stdout=subprocess.DEVNULL)


def _remote(bucket: str) -> str:
    return f'[remote]\nuri = "s3://{bucket}/team"\n'


def test_two_machines_share_work_through_the_servers_ledger(tmp_path: Path, moto: Moto,
                                                            serve) -> None:
    bucket = moto.bucket()
    served = _machine(tmp_path / "server", _remote(bucket))
    server = serve(served, "pipeline.py", "--no-schedule", env=moto.env)
    health = server.get("/health").json()
    assert health["store"] == {"uri": f"s3://{bucket}/team", "env": "default"}
    # machine a names its server in barca.toml, machine b in the environment
    a = _machine(tmp_path / "a", _remote(bucket) + f'[server]\nurl = "{server.url}"\n')
    b = _machine(tmp_path / "b", _remote(bucket))
    env_b = {**moto.env, "BARCA_SERVER": server.url}

    first = barca(a, "get", "scored", "pipeline.py", env=moto.env, timeout=300).expect(0)
    assert first.json["steps_executed"] == 2 * KEYS + 1
    assert first.stderr.count(f"[barca] server {server.url} ([server] url)") == 1
    # the ledger recorded a's run under a's id, as a client's; the store's index names a's
    # results too, so `gc --remote` (which keeps what an index names) lists none of them
    recorded = server.get(f"/runs/{first.json['run_id']}").json()["run"]
    assert recorded["triggered_by"] == "client" and recorded["status"] == "success"
    assert moto.fs.exists(f"{bucket}/team/default/index")
    survey = barca(a, "gc", "--remote", "--dry-run", "--grace", "0", "--json",
                   env=moto.env).expect(0).json
    assert survey["objects"] > 0 and survey["garbage_objects"] == 0, survey
    moto.taken()

    second = barca(b, "get", "scored", "pipeline.py", env=env_b, timeout=300).expect(0).json
    assert second["steps_executed"] == 1  # the sensor, which observes on every run
    assert second["final_output"] == first.json["final_output"]
    fetched = {p for method, p in moto.taken() if method == "GET" and "/artifacts/" in p}
    assert fetched and all("pipeline.py--scored/" in p for p in fetched), fetched
    assert not (b / ".barca" / "artifacts" / "pipeline.py--cleaned").exists()

    # one retailer's orders change on both machines: a computes it, b finds it in the ledger
    for root in (a, b):
        _warehouse(root, "touch", "r000010")
    tick = barca(a, "get", "scored", "pipeline.py", env=moto.env, timeout=120).expect(0).json
    assert tick["steps_executed"] == 3
    again = barca(b, "get", "scored", "pipeline.py", env=env_b, timeout=120).expect(0).json
    assert again["steps_executed"] == 1
    assert again["final_output"]["retailer=r000010"] == \
        tick["final_output"]["retailer=r000010"]

    # the other commands give the server's answer, configured or with a bare --server;
    # --local gives b's own records
    runs = {r["run_id"] for r in barca(b, "history", env=env_b).expect(0).json["runs"]}
    assert {first.json["run_id"], tick["run_id"]} <= runs
    bare = barca(b, "history", "--server", "--limit", "50", env=env_b).expect(0)
    assert {r["run_id"] for r in bare.json["runs"]} == runs
    assert f"[barca] server {server.url} (BARCA_SERVER)" in bare.stderr
    own = barca(b, "history", "--local", env=env_b).expect(0).json["runs"]
    assert {r["run_id"] for r in own} == {second["run_id"], again["run_id"]}


SLOW = """
import os, time
from barca import asset

@asset
def numbers() -> list:
    return list(range(10))

@asset(inputs={"numbers": numbers})
def total(numbers: list) -> int:
    open("total.started", "w").close()
    while not os.path.exists("go"):
        time.sleep(0.05)
    return sum(numbers)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_post_the_server_missed_is_kept_and_sent_by_the_next_command(
        tmp_path: Path, moto: Moto, serve) -> None:
    bucket = moto.bucket()
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    toml = _remote(bucket)
    served = write(tmp_path / "server", {"pipeline.py": SLOW, "barca.toml": toml})
    a = write(tmp_path / "a", {"pipeline.py": SLOW, "barca.toml": toml})
    b = write(tmp_path / "b", {"pipeline.py": SLOW, "barca.toml": toml})
    env = {**moto.env, "BARCA_SERVER": url}
    server = serve(served, "pipeline.py", "--no-schedule", env=moto.env, port=port)

    proc = start_barca(a, "get", "total", "pipeline.py", env=env)
    wait_for(lambda: (a / "total.started").exists(), "the step to start")
    server.terminate()  # stopped by its pid while the step runs: the post cannot reach it
    (a / "go").touch()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    run_id = json.loads(out)["run_id"]
    assert json.loads(out)["final_output"] == 45  # the output is the run's, as always
    assert f"[barca] warning: run {run_id} was not recorded on the server {url}" in err
    status = barca(a, "status", "pipeline.py", "--local", env=env).expect(0).json
    total = next(n for n in status["nodes"] if n["name"] == "total")
    assert (total["cache"]["state"], total["cache"]["reason"]) == ("unsynced", "not_in_ledger")

    server = serve(served, "pipeline.py", "--no-schedule", env=moto.env, port=port)
    assert server.get(f"/runs/{run_id}").status_code == 404
    nxt = barca(a, "get", "total", "pipeline.py", env=env).expect(0)
    assert f"[barca] recorded run {run_id} on the server (run {run_id})" in nxt.stderr
    assert nxt.json["steps_executed"] == 0
    assert server.get(f"/runs/{run_id}").json()["run"]["triggered_by"] == "client"
    # and the other machine finds a's results through the ledger: it computes nothing
    (b / "go").touch()
    other = barca(b, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (other["steps_executed"], other["final_output"]) == (0, 45)
    assert not (b / "total.started").exists()
    # --local bypasses the server: here, on b's own records only (it has none: it computes)
    local = barca(b, "get", "total", "pipeline.py", "--local", "--refresh", "total",
                  env={**env, "BARCA_SERVER": "http://127.0.0.1:9"}).expect(0)
    assert local.json["steps_executed"] == 1 and "[barca] server" not in local.stderr


PLAIN = """
from barca import asset

@asset
def numbers() -> list:
    return list(range(10))
"""


def test_the_ledger_routes_check_what_they_record(tmp_path: Path, moto: Moto, serve) -> None:
    bucket = moto.bucket()
    root = write(tmp_path / "s", {"pipeline.py": PLAIN, "barca.toml": _remote(bucket)})
    server = serve(root, "pipeline.py", "--no-schedule", env=moto.env, token="t" * 20)
    lookup = {"hashes": [{"node_id": "pipeline.py:numbers", "run_hash": "ab" * 16}]}
    assert server.client.post("/ledger/lookup", json=lookup, headers={
        "Authorization": ""}).status_code == 401  # behind the token, like every POST
    assert server.post("/ledger/lookup", json=lookup).json()["results"] == [
        {"node_id": "pipeline.py:numbers", "run_hash": "ab" * 16, "exists": False,
         "path": None, "format": None, "size_bytes": None, "digest": None}]
    post = {"run": {"run_id": "c0ffee000001", "status": "success"},
            "steps": [{"node_id": "pipeline.py:numbers", "keys": [""],
                       "run_hashes": ["ab" * 16], "paths": ["numbers.abab.json"],
                       "formats": "json", "sizes": [3], "digests": ["cd" * 16]}],
            "objects": {"pipeline.py--numbers/numbers.abab.json": {"digest": "ef" * 32,
                                                                   "size": 3}}}
    refused = server.post("/ledger/runs", json=post)
    assert refused.status_code == 409 and "is not in the store" in refused.json()["error"]
    assert server.get("/runs/c0ffee000001").status_code == 404  # nothing recorded
    outside = json.loads(json.dumps(post))
    outside["steps"][0]["paths"] = ["../../etc/passwd"]
    assert server.post("/ledger/runs", json=outside).status_code == 409
    no_store = write(tmp_path / "n", {"pipeline.py": PLAIN, "barca.toml": ""})
    plain = serve(no_store, "pipeline.py", "--no-schedule")
    assert plain.get("/health").json()["store"] is None
    assert plain.post("/ledger/runs", json=post).status_code == 400
    assert {"/ledger/lookup", "/ledger/runs"} <= set(server.get("/openapi.json").json()["paths"])


def test_a_configured_server_is_checked_before_anything_runs(tmp_path: Path,
                                                             moto: Moto, serve) -> None:
    bucket = moto.bucket()
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": ""})
    down = "http://127.0.0.1:9"
    # a configured server needs the [remote] its ledger records
    bad = barca(root, "get", "numbers", "pipeline.py", env={"BARCA_SERVER": down}).expect(2)
    assert "no [remote] store" in bad.envelope["error"]
    assert "[remote] uri" in bad.envelope["remediation"]
    # a server that cannot be reached is exit 3 naming it, and --local the way around it
    env = {**moto.env, "BARCA_SERVER": down, "BARCA_REMOTE_URI": f"s3://{bucket}"}
    bad = barca(root, "get", "numbers", "pipeline.py", env=env).expect(3)
    assert down in bad.envelope["error"] and "--local" in bad.envelope["remediation"]
    assert not (root / ".barca" / "artifacts").exists()
    # a server whose ledger is for another store is exit 2 naming both
    served = write(tmp_path / "s", {"pipeline.py": PLAIN, "barca.toml": _remote(bucket)})
    server = serve(served, "pipeline.py", "--no-schedule", env=moto.env)
    other = {**env, "BARCA_SERVER": server.url, "BARCA_REMOTE_URI": f"s3://{bucket}/other"}
    bad = barca(root, "get", "numbers", "pipeline.py", env=other).expect(2)
    assert f"s3://{bucket}/team" in bad.envelope["error"]
    assert f"s3://{bucket}/other" in bad.envelope["error"]


@pytest.mark.parametrize("args, env, toml, error", [
    (["get", "numbers", "pipeline.py", "--local", "--server"], {}, "",
     "--local and --server cannot be used together"),
    (["status", "--server", "pipeline.py"], {}, "",
     "--server without a URL means the configured server, and none is configured"),
    (["get", "numbers", "pipeline.py"], {}, '[server]\nurl = "127.0.0.1:8274"\n',
     "barca.toml: [server] url must be an http:// or https:// URL"),
    (["history"], {}, '[server]\nurl = "http://127.0.0.1:9"\n',
     "a server is configured ([server] url http://127.0.0.1:9) but no [remote] store"),
    (["plan", "pipeline.py", "--server"], {"BARCA_SERVER": "http://127.0.0.1:9"}, "",
     "`barca plan` always runs here"),
])
def test_the_server_flags_and_settings_are_exit_2_when_wrong(tmp_path: Path, args: list,
                                                             env: dict, toml: str,
                                                             error: str) -> None:
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": toml})
    bad = barca(root, *args, env=env).expect(2)
    assert bad.envelope["error"].startswith(error), bad.envelope
    assert not (root / ".barca").exists()
