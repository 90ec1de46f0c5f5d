"""`barca get --executor ray` on a real multi-node Ray cluster of this machine (the `ray_cluster`
fixture: a head and a worker node, each its own raylet) plus a node on another loopback address,
which Ray takes for another machine: so the project's files travel with the job (working_dir)
and results go to a real S3 endpoint on loopback (moto). The CLI process stays the coordinator.

Seed 000's keyed pipeline (with a key that fails and a `batch="all"` node) gives the same values,
run hashes and failures on the cluster as the local executor gives on this machine; a node
killed mid-run loses no recorded result; `--executor`, BARCA_EXECUTOR and `[executor] kind`
choose Ray (a local run never imports it); a local store on such a cluster is refused, and a
cluster that does not answer is exit 3 at once.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import (Moto, barca, db_rows, descendants, drive, poll, require_moto,
                      start_barca)

pytestmark = pytest.mark.ray
pytest.importorskip("ray")
require_moto()

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "keyed_partitions"
KEYS = 12
MORE = '''

@asset(partitions={"retailer": partitions_from(cleaned)})
def checked(retailer: str, cleaned: dict) -> dict:
    if retailer == "r000005":
        raise ValueError(f"retailer {retailer} has orders nobody trusts")
    return cleaned


@asset(partitions={"retailer": partitions_from(cleaned)}, batch="all")
def totals(retailer: list[str], cleaned: dict[str, dict]) -> dict:
    print(f"totalling {len(retailer)} retailers")
    return {r: cleaned[r]["rows"] * 10 for r in retailer}
'''
ROWS = ("select node_id, key, run_hash, status, output_hash, error_type, error_message "
        "from materializations where node_id != 'pipeline.py:retailer_versions' "
        "order by node_id, key, run_hash, status")


@pytest.fixture(scope="module")
def other_machine(ray_cluster) -> Any:
    """A node on 127.0.0.2: to Ray, a machine of its own (the cluster is no longer one
    machine's); removed with the module."""
    node = ray_cluster.add_node(node_ip_address="127.0.0.2")
    yield node
    if node in ray_cluster.cluster.worker_nodes:
        ray_cluster.remove_node(node)


def _project(root: Path, pipeline: str | None = None, toml: str = "") -> Path:
    root.mkdir()
    if pipeline is None:
        shutil.copy(EXAMPLE / "pipeline.py", root / "pipeline.py")
        with open(root / "pipeline.py", "a") as fh:
            fh.write(MORE)
        _warehouse(root, "build", str(KEYS))
    else:
        (root / "pipeline.py").write_text(textwrap.dedent(pipeline))
    (root / "barca.toml").write_text(toml)
    return root


def _warehouse(root: Path, *args: str) -> None:
    subprocess.run([sys.executable, str(EXAMPLE / "warehouse.py"), *args], cwd=root,
                   check=True, stdout=subprocess.DEVNULL)


def _scenario(root: Path, env: dict[str, str]) -> list[dict]:
    """First run, a one-key tick, a failing key, a batch call: what each run printed."""
    first = barca(root, "get", "scored", "pipeline.py", env=env, timeout=120).expect(0).json
    assert first["steps_executed"] == 2 * KEYS + 1
    _warehouse(root, "touch", "r000003")
    tick = barca(root, "get", "scored", "pipeline.py", env=env, timeout=120).expect(0).json
    assert tick["steps_executed"] == 3
    failing = barca(root, "get", "checked", "pipeline.py", env=env, timeout=120).expect(1)
    batch = barca(root, "get", "totals", "pipeline.py", env=env, timeout=120).expect(0)
    assert "[pipeline.py:totals[batch=b1]] totalling 12 retailers" in batch.stderr
    return [first, tick, failing.envelope, batch.json]


def _comparable(report: dict) -> dict:
    """What a run printed, without what differs from run to run (ids, times)."""
    out = {k: v for k, v in report.items() if k in ("status", "steps_executed", "final_output",
                                                     "error", "node", "code")}
    out["steps"] = sorted((s["id"], s.get("status"), s.get("reason")) for s in
                          report.get("steps", []))
    return out


def test_the_seed_pipeline_on_the_cluster_gives_the_local_executors_values_and_hashes(
        tmp_path: Path, ray_cluster, other_machine, moto: Moto) -> None:
    here = _project(tmp_path / "local")
    there = _project(tmp_path / "cluster", toml=f'[remote]\nuri = "s3://{moto.bucket()}/t"\n')
    local = _scenario(here, {})
    on_ray = _scenario(there, {**moto.env, **ray_cluster.env, "BARCA_EXECUTOR": "ray"})

    # the project's files went to the cluster with the job (Ray's working_dir)
    assert (there / "pipeline.py").read_text() in _shipped(ray_cluster)
    assert [_comparable(r) for r in on_ray] == [_comparable(r) for r in local]
    assert db_rows(there, ROWS) == db_rows(here, ROWS)  # every key's run hash and outcome
    [(traceback,)] = db_rows(there, "select error_traceback from materializations "
                                    "where status = 'failed'")
    assert 'raise ValueError(f"retailer {retailer} has orders nobody trusts")' in traceback
    assert traceback.rstrip().endswith("ValueError: retailer r000005 has orders nobody trusts")
    logs = barca(there, "logs", env=moto.env).expect(0).stdout
    assert "totalling 12 retailers" in logs
    # what the run recorded is in the shared store: a copy with no local results finds it all
    shutil.rmtree(there / ".barca" / "artifacts")
    again = barca(there, "get", "scored", "pipeline.py", env=moto.env).expect(0).json
    assert again["steps_executed"] == 1  # the sensor, which observes on every run
    assert again["final_output"] == local[1]["final_output"]


def test_the_executor_is_chosen_by_flag_variable_or_barca_toml(
        tmp_path: Path, ray_cluster, other_machine) -> None:
    root = _project(tmp_path / "p", PLAIN, toml='[executor]\nkind = "ray"\n')
    env = ray_cluster.env
    # barca.toml chooses Ray; on a cluster of several machines the local store is refused
    refused = barca(root, "get", "doubled", "pipeline.py", env=env, timeout=120).expect(2)
    assert "nodes on other machines" in refused.envelope["error"]
    assert "[remote] uri" in refused.envelope["remediation"]
    # BARCA_EXECUTOR wins over barca.toml, --executor over both
    here = {**env, "BARCA_EXECUTOR": "local"}
    assert barca(root, "get", "doubled", "pipeline.py", env=here).expect(0).json[
        "steps_executed"] == 4
    barca(root, "get", "doubled", "pipeline.py", "--refresh", "doubled", "--executor", "ray",
          env=here, timeout=120).expect(2)
    bad = barca(root, "get", "doubled", "pipeline.py", env={**env, "BARCA_EXECUTOR": "spark"})
    assert "BARCA_EXECUTOR must be one of local, ray" in bad.expect(2).envelope["error"]
    # a run on the local executor never imports Ray
    found = drive(root, "import json, sys\n"
                        "from barca.engine.driver import run\n"
                        "run('get', 'doubled', ['pipeline.py'], refresh_all=True, "
                        "executor='local')\n"
                        "print(json.dumps(sorted(m for m in sys.modules "
                        "if m.split('.')[0] == 'ray')))\n")
    assert found == []


PLAIN = """
    from barca import asset, partitions

    @asset(partitions={"n": partitions([str(i) for i in range(4)])})
    def doubled(n: str) -> int:
        return int(n) * 2
"""

SLOW = """
    import os
    import time
    from barca import asset, partitions

    @asset(partitions={"k": partitions([f"k{i:02d}" for i in range(24)])})
    def slow(k: str) -> str:
        open(os.path.join(MARKS, f"{os.getpid()}-{k}"), "w").close()
        time.sleep(0.4)
        return k.upper()
"""


def test_a_node_killed_mid_run_loses_no_recorded_result(tmp_path: Path, ray_cluster,
                                                          other_machine, moto: Moto) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    root = _project(tmp_path / "p", f"MARKS = {str(marks)!r}\n" + textwrap.dedent(SLOW),
                    toml=f'[remote]\nuri = "s3://{moto.bucket()}/t"\n')
    doomed = ray_cluster.add_node(node_ip_address="127.0.0.3")
    raylet = doomed.all_processes["raylet"][0].process.pid
    env = {**moto.env, **ray_cluster.env}
    run = start_barca(root, "get", "slow", "pipeline.py", "--executor", "ray", env=env)
    try:
        poll(lambda: any(int(m.name.split("-")[0]) in descendants(raylet)
                         for m in marks.iterdir()), "a step on the node to be killed", 90)
        ray_cluster.remove_node(doomed)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    report = json.loads(out)
    assert report["final_output"] == {f"k=k{i:02d}": f"K{i:02d}" for i in range(24)}
    rows = db_rows(root, "select status, count(*) from materializations group by status")
    assert rows == [("success", 24)]
    # each recorded result is whole in the store: found there with no local copy
    shutil.rmtree(root / ".barca" / "artifacts")
    again = barca(root, "get", "slow", "pipeline.py", env=moto.env).expect(0).json
    assert again["steps_executed"] == 0
    assert again["final_output"] == report["final_output"]


def _shipped(ray_cluster) -> list[str]:
    """The pipeline files of the working_dir packages the cluster's nodes unpacked."""
    session = Path(ray_cluster.cluster.head_node.get_session_dir_path())
    return [p.read_text() for p in
            session.glob("runtime_resources/working_dir_files/*/pipeline.py")]


def test_a_cluster_that_does_not_answer_is_exit_3_at_once(tmp_path: Path) -> None:
    root = _project(tmp_path / "p", PLAIN)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{sock.getsockname()[1]}"
    failed = barca(root, "get", "doubled", "pipeline.py", "--executor", "ray",
                   env={"RAY_ADDRESS": address}).expect(3)
    assert failed.envelope["error"].startswith(f"cannot reach the Ray cluster at {address}")
    assert "RAY_ADDRESS" in failed.envelope["remediation"]
