"""A remote artifact store shared by two project copies (two "machines": their own directory
and database), over a real S3 endpoint on loopback: moto's server mode, reached through s3fs
with AWS_ENDPOINT_URL and dummy credentials. The store is a cache by itself: no barca server.

moto records every request it serves (MOTO_ENABLE_RECORDING), so the tests count the PUTs and
GETs a command made, and which objects it read.
"""

from __future__ import annotations

import collections
import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import Moto, barca, require_moto, write

require_moto()

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "keyed_partitions"
KEYS = 300


def _machine(root: Path, toml: str = "") -> Path:
    """A copy of the seed's keyed example with its own warehouse of KEYS retailers."""
    root.mkdir()
    shutil.copy(EXAMPLE / "pipeline.py", root / "pipeline.py")
    (root / "barca.toml").write_text(toml)
    _warehouse(root, "build", str(KEYS))
    return root


def _warehouse(root: Path, *args: str) -> None:
    subprocess.run([sys.executable, str(EXAMPLE / "warehouse.py"), *args], cwd=root,
                   check=True, stdout=subprocess.DEVNULL)


def _count(requests: list[tuple[str, str]]) -> collections.Counter:
    return collections.Counter(method for method, _ in requests)


def test_two_machines_share_one_store_and_the_second_runs_nothing(tmp_path: Path,
                                                                  moto: Moto) -> None:
    bucket = moto.bucket()
    # machine a names the store in barca.toml, machine b in the environment
    a = _machine(tmp_path / "a", f'[remote]\nuri = "s3://{bucket}/team"\n')
    b = _machine(tmp_path / "b")
    env_b = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}/team"}

    first = barca(a, "get", "scored", "pipeline.py", env=moto.env).expect(0).json
    assert first["steps_executed"] == 2 * KEYS + 1
    puts = [path for method, path in moto.taken() if method == "PUT"]
    objects = moto.fs.find(f"{bucket}/team/default/artifacts")
    moto.taken()  # not the listing just made
    # small results travel as whole packs: far fewer objects, and PUTs, than keys
    assert len(objects) < KEYS / 2, len(objects)
    assert len(puts) < KEYS / 2, len(puts)
    assert all("," in p.rpartition("/")[2] for p in objects)  # named by store key and digest

    second = barca(b, "get", "scored", "pipeline.py", env=env_b).expect(0).json
    assert second["steps_executed"] == 1  # the sensor, which observes on every run
    assert {s["id"].split(":")[1] for s in second["steps"] if s["status"] != "cached"} == \
        {"retailer_versions"}
    assert second["final_output"] == first["final_output"]
    taken = moto.taken()
    fetched = {p for method, p in taken if method == "GET" and "/artifacts/" in p}
    # it downloaded what its target reads (scored), nothing of cleaned
    assert fetched and all("pipeline.py--scored/" in p for p in fetched), fetched
    assert _count(taken)["PUT"] == 1  # its sensor's observation
    assert not (b / ".barca" / "artifacts" / "pipeline.py--cleaned").exists()
    # its records are its own: one run, served from the shared store
    history = barca(b, "history", env=env_b).expect(0).json["runs"]
    assert [r["steps_cached"] for r in history] == [2 * KEYS]

    # one retailer's orders change on both machines: a computes it, b finds it
    for root in (a, b):
        _warehouse(root, "touch", "r000010")
    tick = barca(a, "get", "scored", "pipeline.py", env=moto.env).expect(0).json
    assert tick["steps_executed"] == 3
    assert _count(moto.taken())["PUT"] < 10  # one pack per asset, the index, the sensor
    again = barca(b, "get", "scored", "pipeline.py", env=env_b).expect(0).json
    assert again["steps_executed"] == 1
    assert again["final_output"]["retailer=r000010"] == \
        tick["final_output"]["retailer=r000010"]
    print(f"\n{KEYS} keys: first run {len(puts)} PUTs for {2 * KEYS + 1} results; the second "
          f"machine's get {_count(taken)['GET']} GETs, {len(fetched)} objects fetched")


PLAIN = """
from barca import asset

@asset
def numbers() -> list:
    return list(range(10))

@asset(inputs={"numbers": numbers})
def total(numbers: list) -> int:
    open("total.ran", "a").write("x")
    return sum(numbers)
"""


def test_a_corrupted_object_is_detected_by_digest(tmp_path: Path, moto: Moto) -> None:
    bucket = moto.bucket()
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}"}
    a = write(tmp_path / "a", {"pipeline.py": PLAIN, "barca.toml": ""})
    b = write(tmp_path / "b", {"pipeline.py": PLAIN, "barca.toml": ""})
    assert barca(a, "get", "total", "pipeline.py", env=env).expect(0).json["final_output"] == 45
    [obj] = moto.fs.find(f"{bucket}/default/artifacts/pipeline.py--total")
    moto.fs.pipe_file(obj, b"46")  # the same name, other bytes
    bad = barca(b, "get", "total", "pipeline.py", env=env).expect(3)
    assert "does not match its digest" in bad.envelope["error"]
    assert not (b / ".barca" / "artifacts" / "pipeline.py--total").exists() or \
        not any((b / ".barca" / "artifacts" / "pipeline.py--total").iterdir())


def test_an_unreachable_or_missing_store_is_exit_3_before_any_step(tmp_path: Path,
                                                                   moto: Moto) -> None:
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": ""})
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    down = {**moto.env, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{closed}",
            "BARCA_REMOTE_URI": "s3://nobody-listens"}
    bad = barca(root, "get", "total", "pipeline.py", env=down, timeout=120).expect(3)
    assert bad.envelope["error"].startswith("the artifact store s3://nobody-listens failed")
    assert not (root / "total.ran").exists()
    missing = {**moto.env, "BARCA_REMOTE_URI": "s3://no-such-bucket/x"}
    bad = barca(root, "get", "total", "pipeline.py", env=missing).expect(3)
    assert bad.envelope["error"] == "the artifact store s3://no-such-bucket/x does not exist"
    assert not (root / "total.ran").exists()
    # with a sensor, whose worker starts while the store is checked: it observes nothing
    sensing = write(tmp_path / "s", {"pipeline.py": SENSING, "barca.toml": ""})
    bad = barca(sensing, "get", "total", "pipeline.py", env=down, timeout=120).expect(3)
    assert bad.envelope["error"].startswith("the artifact store s3://nobody-listens failed")
    assert not (sensing / "observed").exists() and not (sensing / "total.ran").exists()
    assert barca(sensing, "history", env=down).expect(0).json["runs"] == []


SENSING = """
from barca import asset, sensor

@sensor
def clock() -> int:
    open("observed", "a").write("x")
    return 1

@asset(inputs={"clock": clock})
def total(clock: int) -> int:
    open("total.ran", "a").write("x")
    return clock
"""


def test_storage_options_come_from_barca_toml_and_the_environment(tmp_path: Path,
                                                                   moto: Moto) -> None:
    bucket = moto.bucket()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    credentials = {**moto.env, "AWS_ENDPOINT_URL": None}  # the endpoint only from options
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": (
        f'[remote]\nuri = "s3://{bucket}"\n[remote.storage_options.s3]\n'
        f'endpoint_url = "{moto.url}"\n[remote.storage_options.gcs]\nproject = "other"\n')})
    assert barca(root, "get", "total", "pipeline.py", env=credentials).expect(0).json[
        "steps_executed"] == 2
    assert moto.fs.find(f"{bucket}/default/artifacts/pipeline.py--total")
    # BARCA_STORAGE_OPTIONS wins, key by key
    wrong = {**credentials, "BARCA_STORAGE_OPTIONS": json.dumps(
        {"endpoint_url": f"http://127.0.0.1:{closed}"})}
    bad = barca(root, "get", "total", "pipeline.py", "--refresh", "total", env=wrong,
                timeout=120).expect(3)
    assert bad.envelope["error"].startswith(f"the artifact store s3://{bucket} failed")


def test_a_shared_directory_is_a_store_too(tmp_path: Path) -> None:
    shared = tmp_path / "mount"
    env = {"BARCA_REMOTE_URI": f"file://{shared}"}
    a = write(tmp_path / "a", {"pipeline.py": PLAIN, "barca.toml": ""})
    b = write(tmp_path / "b", {"pipeline.py": PLAIN, "barca.toml": ""})
    assert barca(a, "get", "total", "pipeline.py", env=env).expect(0).json["steps_executed"] == 2
    second = barca(b, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (second["steps_executed"], second["final_output"]) == (0, 45)
    assert not (b / "total.ran").exists()


TABLE = """
import pyarrow as pa
from barca import asset

@asset
def table() -> pa.Table:
    return pa.table({"x": list(range(1000))})

@asset(inputs={"table": table})
def rows(table: pa.Table) -> int:
    return table.num_rows
"""


def test_a_table_computed_on_one_machine_is_read_by_a_step_on_the_other(tmp_path: Path) -> None:
    env = {"BARCA_REMOTE_URI": f"file://{tmp_path / 'mount'}"}
    a = write(tmp_path / "a", {"pipeline.py": TABLE, "barca.toml": ""})
    b = write(tmp_path / "b", {"pipeline.py": TABLE, "barca.toml": ""})
    assert barca(a, "get", "table", "pipeline.py", env=env).expect(0).json[
        "steps_executed"] == 1
    got = barca(b, "get", "rows", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (1, 1000)  # table came from a
    [fetched] = (b / ".barca" / "artifacts" / "pipeline.py--table").iterdir()
    assert fetched.suffix == ".parquet"


@pytest.mark.parametrize("env, error, fix", [
    ({"BARCA_REMOTE_URI": "gs://bucket/x"}, "BARCA_REMOTE_URI: gs:// needs a package",
     "pip install 'barca[gcs]'"),
    ({"BARCA_REMOTE_URI": "abfs://container/x"}, "BARCA_REMOTE_URI: abfs:// needs a package",
     "pip install 'barca[azure]'"),
    ({"BARCA_REMOTE_URI": "ftp://host/x"}, "BARCA_REMOTE_URI: cannot share results through",
     "use s3://bucket/prefix"),
    ({"BARCA_REMOTE_URI": "s3://b", "BARCA_STORAGE_OPTIONS": "[1]"},
     "BARCA_STORAGE_OPTIONS must be a JSON object", "set it like BARCA_STORAGE_OPTIONS="),
])
def test_a_store_barca_cannot_open_is_exit_2_naming_the_fix(tmp_path: Path, env: dict,
                                                            error: str, fix: str) -> None:
    if "gs://" in env["BARCA_REMOTE_URI"] and _installed("gcsfs") or \
            "abfs://" in env["BARCA_REMOTE_URI"] and _installed("adlfs"):
        pytest.skip("its file system package is installed here")
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": ""})
    bad = barca(root, "get", "total", "pipeline.py", env=env).expect(2)
    assert bad.envelope["error"].startswith(error)
    assert bad.envelope["remediation"].startswith(fix)
    assert not (root / "total.ran").exists()


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
