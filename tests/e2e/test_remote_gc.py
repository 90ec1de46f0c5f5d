"""`barca gc --remote`: the only way barca deletes objects from a shared store, over moto's S3
server on loopback. Garbage is only what no machine can find (in no index, or an older copy
of a rewritten result) and older than the grace period; a dry run lists it first, and the
deletion takes only what the dry run listed and is still garbage.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from conftest import Moto, barca, require_moto, write

require_moto()

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


def _put(moto: Moto, leaf_path: str, data: bytes) -> str:
    """An object as barca names them (`<leaf>,<sha256>`), as another machine left it."""
    path = f"{leaf_path},{hashlib.sha256(data).hexdigest()}"
    moto.fs.pipe_file(path, data)
    return path


def test_gc_remote_deletes_only_what_a_dry_run_listed_and_no_machine_can_use(
        tmp_path: Path, moto: Moto) -> None:
    bucket = moto.bucket()
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}/team"}
    a = write(tmp_path / "a", {"pipeline.py": PLAIN, "barca.toml": ""})
    b = write(tmp_path / "b", {"pipeline.py": PLAIN, "barca.toml": ""})
    assert barca(a, "get", "total", "pipeline.py", env=env).expect(0).json["final_output"] == 45
    artifacts = f"{bucket}/team/default/artifacts"
    [numbers] = moto.fs.find(f"{artifacts}/pipeline.py--numbers")
    [total] = moto.fs.find(f"{artifacts}/pipeline.py--total")
    # what other machines left: a run killed after its upload, before its index
    crashed = _put(moto, f"{artifacts}/pipeline.py--total/crashed.abc.json", b"1")
    late = _put(moto, f"{artifacts}/pipeline.py--total/late.abc.json", b"2")
    # numbers computed again elsewhere with other bytes (same value): the older is superseded
    again = _put(moto, numbers.rpartition(",")[0], b"[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]")
    # never collected: a node directory with no index (a sensor's), an object not barca's
    sensor = _put(moto, f"{artifacts}/pipeline.py--sensor/obs.abc.json", b"3")
    foreign = f"{artifacts}/README"
    moto.fs.pipe_file(foreign, b"not barca's")

    # nothing is deleted without a dry run's list
    bad = barca(a, "gc", "--remote", env=env).expect(2)
    assert bad.envelope["remediation"].startswith("run `barca gc --remote --dry-run` first")

    # within the default grace period (7 days) everything stays: a live run's upload is young
    young = barca(a, "gc", "--remote", "--dry-run", env=env).expect(0).json
    assert (young["garbage_objects"], young["young_objects"]) == (0, 2)
    assert young["objects"] == 9 and young["store"] == f"s3://{bucket}/team/default"

    listed = barca(a, "gc", "--remote", "--dry-run", "--grace", "0", env=env).expect(0).json
    prefix = f"{bucket}/team/default/"
    assert {(g["path"], g["reason"]) for g in listed["garbage"]} == {
        (crashed[len(prefix):], "unreferenced"), (late[len(prefix):], "unreferenced"),
        (numbers[len(prefix):], "superseded")}
    assert listed["garbage_bytes"] == sum(g["bytes"] for g in listed["garbage"]) == 1 + 1 + 21
    assert listed["by_reason"] == {"unreferenced": {"objects": 2, "bytes": 2},
                                   "superseded": {"objects": 1, "bytes": 21}}
    moto.fs.invalidate_cache()
    assert moto.fs.exists(crashed) and moto.fs.exists(numbers)  # a dry run deletes nothing

    # meanwhile a machine uploads `late` again (same name and bytes): it is young again, kept
    moto.fs.pipe_file(late, b"2")
    done = barca(a, "gc", "--remote", env=env).expect(0).json
    assert sorted(g["path"] for g in done["deleted"]) == sorted(
        p[len(prefix):] for p in (crashed, numbers))
    assert (done["deleted_objects"], done["deleted_bytes"], done["skipped_objects"]) == (2, 22, 1)
    moto.fs.invalidate_cache()
    left = set(moto.fs.find(artifacts))
    assert left == {total, again, late, sensor, foreign}
    # the list is used up
    barca(a, "gc", "--remote", env=env).expect(2)

    # another machine still finds everything: it runs nothing and reads the right values
    got = barca(b, "get", "total", "pipeline.py", env=env).expect(0).json
    assert (got["steps_executed"], got["final_output"]) == (0, 45)
    assert barca(b, "get", "numbers", "pipeline.py", env=env).expect(0).json[
        "final_output"] == list(range(10))
    assert not (b / "total.ran").exists()

    # a result deleted by hand (or by a lifecycle rule): its index object finds nothing now
    moto.fs.rm(total)
    [index] = moto.fs.find(f"{bucket}/team/default/index/pipeline.py--total")
    dangling = barca(a, "gc", "--remote", "--dry-run", "--grace", "0", env=env).expect(0).json
    assert [(g["path"], g["reason"]) for g in dangling["garbage"]] == [
        ("artifacts/pipeline.py--total/late.abc.json," + late.rpartition(",")[2],
         "unreferenced"), (index[len(prefix):], "dangling_index")]


def test_gc_remote_without_a_store_is_exit_2_and_local_gc_is_unchanged(tmp_path: Path) -> None:
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": ""})
    bad = barca(root, "gc", "--remote", "--dry-run").expect(2)
    assert bad.envelope["error"].startswith("barca gc --remote collects the shared store")
    assert "[remote] uri" in bad.envelope["remediation"]
    both = barca(root, "gc", "--remote", "--max-size", "1GB",
                 env={"BARCA_REMOTE_URI": f"file://{tmp_path / 'mount'}"}).expect(2)
    assert both.envelope["error"].startswith("--max-size trims this machine's artifacts")
    barca(root, "get", "total", "pipeline.py").expect(0)
    assert barca(root, "gc", "--dry-run").expect(0).json["kept_files"] == 2


def test_gc_remote_on_a_shared_directory_removes_half_written_uploads(tmp_path: Path) -> None:
    mount = tmp_path / "mount"
    env = {"BARCA_REMOTE_URI": f"file://{mount}"}
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": ""})
    barca(root, "get", "total", "pipeline.py", env=env).expect(0)
    folder = mount / "default" / "artifacts" / "pipeline.py--total"
    [result] = folder.iterdir()
    aside = folder / f"{result.name}.1a2b3c4d.tmp"  # an upload killed before its rename
    aside.write_bytes(b"4")
    listed = barca(root, "gc", "--remote", "--dry-run", "--grace", "0", env=env).expect(0).json
    assert [(g["path"], g["reason"]) for g in listed["garbage"]] == [
        (f"artifacts/pipeline.py--total/{aside.name}", "leftover")]
    pretty = barca(root, "gc", "--remote", "--pretty", env=env).expect(0)
    assert pretty.stdout.startswith(f"Deleted 1 object (1 B) from file://{mount}/default.")
    assert sorted(folder.iterdir()) == [result]
