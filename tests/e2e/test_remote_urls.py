"""What a remote store adds to `get` and `status` (0.33): signed links to results
(`barca get -o url`, `barca.signed_url`) and `unsynced` results in `barca status` (this
machine's copy and the store's object apart), over a real S3 endpoint on loopback (moto's
server mode, the `moto` fixture of tests/conftest.py) reached through s3fs.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from conftest import Moto, barca, barca_env, require_moto, write

require_moto()

PIPELINE = """
from barca import asset

@asset
def numbers() -> list:
    return list(range(10))

@asset(inputs={"numbers": numbers})
def total(numbers: list) -> int:
    return sum(numbers)
"""
TOTAL = ".barca/artifacts/pipeline.py--total"


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


def _expires(url: str) -> int:
    return int(parse_qs(urlparse(url).query)["X-Amz-Expires"][0])


def test_get_o_url_and_signed_url_give_links_that_download_the_result(tmp_path: Path,
                                                                       moto: Moto) -> None:
    bucket = moto.bucket()
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}/team"}
    root = write(tmp_path / "a", {"pipeline.py": PIPELINE, "barca.toml": ""})
    got = barca(root, "get", "total", "pipeline.py", "-o", "url", env=env).expect(0)
    [url] = got.stdout.splitlines()
    [local] = (root / TOTAL).iterdir()
    assert _download(url) == local.read_bytes() == b"45"
    assert _expires(url) == 3600  # an hour unless told
    longer = barca(root, "get", "total", "pipeline.py", "-o", "url", "--expires", "12h",
                   env=env).expect(0).stdout.strip()
    assert _expires(longer) == 12 * 3600 and _download(longer) == b"45"
    too_long = barca(root, "get", "total", "pipeline.py", "-o", "url", "--expires", "8d",
                     env=env).expect(2)
    assert too_long.envelope["remediation"].startswith("give seconds or a number with m, h")
    # in Python, by the local copy's path or the result's place in the store
    code = ("import barca, sys; print(barca.signed_url(sys.argv[1], expires='30m')); "
            "print(barca.signed_url(sys.argv[2], expires=60))")
    place = f"s3://{bucket}/team/default/artifacts/pipeline.py--total/{local.name}"
    out = subprocess.run([sys.executable, "-c", code, f"{TOTAL}/{local.name}", place],
                         cwd=root, env=barca_env(env), capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert [_expires(u) for u in out] == [1800, 60]
    assert [_download(u) for u in out] == [b"45", b"45"]


def test_signed_links_need_an_object_store_exit_2_naming_the_fix(tmp_path: Path,
                                                                  moto: Moto) -> None:
    root = write(tmp_path / "p", {"pipeline.py": PIPELINE, "barca.toml": ""})
    none = barca(root, "get", "total", "pipeline.py", "-o", "url").expect(2)
    assert none.envelope["error"].startswith("signed links are to results in a remote store")
    assert none.envelope["remediation"].startswith('set [remote] uri = "s3://bucket/prefix"')
    assert not (root / ".barca" / "artifacts").exists()  # refused before anything ran
    shared = {"BARCA_REMOTE_URI": f"file://{tmp_path / 'mount'}"}
    directory = barca(root, "get", "total", "pipeline.py", "-o", "url", env=shared).expect(2)
    assert "is a shared directory, which cannot sign links" in directory.envelope["error"]
    code = "import barca; barca.signed_url('.barca/artifacts/x')"
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, env=barca_env(),
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "UsageError: signed links are to results in a remote " \
        "store" in proc.stderr
    # a result recorded before the store was set is not in it: exit 3 naming it
    barca(root, "get", "total", "pipeline.py").expect(0)
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{moto.bucket()}"}
    missing = barca(root, "get", "total", "pipeline.py", "-o", "url", env=env).expect(3)
    assert missing.envelope["error"].endswith("is not in the store")


def _cache(root: Path, env: dict) -> tuple[dict, dict]:
    body = barca(root, "status", "pipeline.py", env=env).expect(0).json
    return {n["name"]: (n["cache"]["state"], n["cache"]["reason"]) for n in body["nodes"]}, \
        body["summary"]


def test_status_shows_results_this_machine_and_the_store_hold_apart(tmp_path: Path,
                                                                     moto: Moto) -> None:
    bucket = moto.bucket()
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}"}
    a = write(tmp_path / "a", {"pipeline.py": PIPELINE, "barca.toml": ""})
    b = write(tmp_path / "b", {"pipeline.py": PIPELINE, "barca.toml": ""})
    barca(a, "get", "total", "pipeline.py", env=env).expect(0)
    nodes, summary = _cache(a, env)
    assert nodes == {"numbers": ("cached", "materialized"), "total": ("cached", "materialized")}
    assert summary["unsynced"] == 0
    moto.taken()
    # the other machine finds both in the store, has neither here
    nodes, summary = _cache(b, env)
    assert nodes == {"numbers": ("unsynced", "store_only"), "total": ("unsynced", "store_only")}
    assert (summary["cached"], summary["unsynced"]) == (0, 2)
    # cheap: listings of the index and of each node's directory, never one GET per object
    taken = moto.taken()
    assert not [p for m, p in taken if m == "GET" and "/artifacts/" in p.partition("?")[0]]
    assert len(taken) <= 8, taken
    human = barca(b, "status", "pipeline.py", "--pretty", env=env).expect(0).stdout
    assert "store only" in human and "2 unsynced" in human
    barca(b, "get", "total", "pipeline.py", env=env).expect(0)  # fetches total only
    nodes, _ = _cache(b, env)
    assert nodes == {"numbers": ("unsynced", "store_only"), "total": ("cached", "materialized")}
    # a local copy that is not the stored one
    [copy] = (b / TOTAL).iterdir()
    copy.write_bytes(b"12345")
    nodes, summary = _cache(b, env)
    assert nodes["total"] == ("unsynced", "mismatch")
    problems = barca(b, "status", "pipeline.py", "--problems", env=env).expect(0).json
    assert {n["name"] for n in problems["nodes"]} == {"numbers", "total"}
    # results recorded before the store was set are here only
    c = write(tmp_path / "c", {"pipeline.py": PIPELINE, "barca.toml": ""})
    barca(c, "get", "total", "pipeline.py").expect(0)
    other = {**moto.env, "BARCA_REMOTE_URI": f"s3://{moto.bucket()}"}
    nodes, summary = _cache(c, other)
    assert nodes == {"numbers": ("unsynced", "local_only"), "total": ("unsynced", "local_only")}
    nodes, summary = _cache(c, {})  # without a store nothing is unsynced
    assert summary["unsynced"] == 0 and nodes["total"] == ("cached", "materialized")
