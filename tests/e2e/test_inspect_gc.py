"""`barca gc`: removes superseded and unreferenced files, oldest first; never a current one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import barca, write

PIPELINE = """
    import os
    from barca import asset, partitions

    @asset(env=["VERSION"])
    def data() -> dict:
        return {"version": os.environ.get("VERSION"), "rows": list(range(200))}

    @asset(inputs={"data": data})
    def summary(data: dict) -> str:
        return f"v{data['version']}"

    @asset(partitions={"region": partitions(["emea", "amer"])}, env=["VERSION"])
    def sales(region: str) -> dict:
        return {"region": region, "version": os.environ.get("VERSION")}
"""


def _files(root: Path, node: str) -> list[str]:
    folder = root / ".barca" / "artifacts" / f"pipeline.py--{node}"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.fixture
def versions(project: Path) -> Path:
    """VERSION 1, then 2, then 3 of every asset: two superseded results per node and key."""
    write(project, {"pipeline.py": PIPELINE})
    for version in ("1", "2", "3"):
        barca(project, "get", "pipeline.py", env={"VERSION": version}).expect(0)
    return project


def _current(root: Path, version: str) -> dict[str, str]:
    """Node name -> the run hash a get of this version is served from (all cached)."""
    body = barca(root, "get", "pipeline.py", "--dry-run", env={"VERSION": version}).expect(0)
    return {s["id"].split(":")[1]: s.get("run_hash") for s in body.json["steps"]}


def test_dry_run_lists_superseded_files_oldest_first_and_removes_nothing(
        versions: Path) -> None:
    before = _files(versions, "data")
    body = barca(versions, "gc", "--dry-run").expect(0).json
    assert body["dry_run"] is True
    data = [e for e in body["evicted"] if e["node"] == "pipeline.py:data"]
    assert len(data) == 2 and all(e["reason"] == "superseded" for e in data)
    assert body["evicted_files"] == 8  # two older versions of data, summary and 2 sales keys
    assert _files(versions, "data") == before and len(before) == 3
    paths = [e["path"] for e in body["evicted"]]
    times = [os.stat(versions / p).st_mtime for p in paths]
    assert times == sorted(times)
    assert body["size_bytes"] - body["evicted_bytes"] == body["after_bytes"]
    on_disk = sum(f.stat().st_blocks * 512 for f in (versions / ".barca" / "artifacts").rglob("*")
                  if f.is_file())
    assert body["size_bytes"] == on_disk  # the space the files take, as `du` counts it


def test_gc_removes_superseded_files_and_keeps_every_current_result(versions: Path) -> None:
    current = _current(versions, "3")
    body = barca(versions, "gc").expect(0).json
    assert body["evicted_files"] == 8 and body["failed"] == []
    assert _files(versions, "data") == [f"{current['data']}.json"]
    for removed in body["evicted"]:
        assert not (versions / removed["path"]).exists()
    again = barca(versions, "get", "pipeline.py", env={"VERSION": "3"}).expect(0).json
    assert again["steps_executed"] == 0  # nothing current was removed
    assert barca(versions, "gc").expect(0).json["evicted_files"] == 0
    runs = barca(versions, "history", "--all").expect(0).json["runs"]
    first = barca(versions, "history", runs[-1]["run_id"], "--pretty").expect(0).stdout
    assert "removed)" in first  # history still lists the old result, marked removed


def test_result_the_current_code_returns_to_is_kept(versions: Path) -> None:
    """Setting VERSION back to 1 is served from the first result: gc must keep that file."""
    old = _current(versions, "1")
    body = barca(versions, "gc", env={"VERSION": "1"}).expect(0).json
    kept = _files(versions, "data")
    assert f"{old['data']}.json" in kept
    assert barca(versions, "get", "data", "pipeline.py", env={"VERSION": "1"}).expect(0).json[
        "steps_executed"] == 0
    assert body["evicted_files"] == 4  # only VERSION=2's four files
    assert all(old["data"] not in e["path"] for e in body["evicted"])


def test_max_size_removes_oldest_until_under_the_limit(versions: Path) -> None:
    full = barca(versions, "gc", "--dry-run").expect(0).json
    oldest = full["evicted"][0]
    limit = full["size_bytes"] - oldest["bytes"]
    body = barca(versions, "gc", "--max-size", str(limit)).expect(0).json
    assert [e["path"] for e in body["evicted"]] == [oldest["path"]]
    assert body["limit_bytes"] == limit and body["after_bytes"] <= limit
    tiny = barca(versions, "gc", "--max-size", "1B", "--pretty").expect(0).stdout
    assert "never removed" in tiny
    assert barca(versions, "gc", "--max-size", "1B").expect(0).json["kept_files"] == 4


def test_unreferenced_files_and_dead_temporary_files_go(versions: Path) -> None:
    folder = versions / ".barca" / "artifacts" / "pipeline.py--data"
    (folder / "0123456789abcdef.json").write_text("{}")
    (folder / ".x.json.999999999.tmp").write_text("half")
    (folder / ".x.json.replaced.999999999.tmp").write_text("a replaced result's second name")
    body = barca(versions, "gc").expect(0).json
    reasons = {Path(e["path"]).name: e["reason"] for e in body["evicted"]}
    assert reasons["0123456789abcdef.json"] == "unreferenced"
    assert reasons[".x.json.999999999.tmp"] == "leftover"
    assert reasons[".x.json.replaced.999999999.tmp"] == "leftover"  # store.local_files.set_aside
    assert not (folder / "0123456789abcdef.json").exists()


def test_env_collects_only_that_environment(versions: Path) -> None:
    barca(versions, "get", "data", "pipeline.py", "--env", "staging",
          env={"VERSION": "1"}).expect(0)
    barca(versions, "get", "data", "pipeline.py", "--env", "staging",
          env={"VERSION": "2"}).expect(0)
    body = barca(versions, "gc", "--env", "staging").expect(0).json
    assert body["evicted_files"] == 1
    assert body["evicted"][0]["path"].startswith(".barca/envs/staging/artifacts/")
    assert len(_files(versions, "data")) == 3  # the default environment is untouched


def test_human_output_and_bad_size(versions: Path) -> None:
    out = barca(versions, "gc", "--dry-run", "--pretty").expect(0).stdout.splitlines()
    assert out[0].startswith("Would remove 8 files (") and "kept 4 current results" in out[0]
    assert sum(line.startswith("  .barca/artifacts/") for line in out) == 8
    done = barca(versions, "gc", "--pretty").expect(0).stdout
    assert done.startswith("Removed 8 files (")
    bad = barca(versions, "gc", "--max-size", "lots").expect(2)
    assert "--max-size" in bad.envelope["error"] and "500MB" in bad.envelope["remediation"]


def test_nothing_recorded_means_nothing_to_do_and_nothing_created(tmp_path: Path) -> None:
    body = barca(tmp_path, "gc").expect(0).json
    assert body["evicted_files"] == 0 and body["size_bytes"] == 0
    assert not (tmp_path / ".barca").exists()
