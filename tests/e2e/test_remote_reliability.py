"""A remote artifact store when things go wrong mid-run, over moto's S3 server on loopback: a
kill -9 of the command and its workers while results upload, and a store that goes away
while a run uploads. What a machine records must always be in the store, and the next run
must complete with the right values.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import (
    barca,
    db_rows,
    Moto,
    gone,
    poll,
    result_bytes,
    start_barca,
    wait_for,
)
from test_remote_store import _machine

KEYS = 600  # enough that a first run is still uploading when the test acts on it
RECORDED = ("SELECT artifact_path, run_hash FROM materializations WHERE status = 'success' "
             "AND artifact_path IS NOT NULL")


def _recorded(root: Path) -> list[tuple]:
    try:
        return db_rows(root, RECORDED)
    except Exception:  # noqa: BLE001 (no database yet, or its tables not yet made)
        return []


def _uploaded(moto: Moto) -> bool:
    return any(method == "PUT" and "/artifacts/" in path for method, path in moto.taken())


def _stored_objects(moto: Moto, prefix: str) -> dict[str, list[bytes]]:
    """file key (under artifacts/) -> the bytes of its objects, each checked against the
    digest in its name (a sensor's observation may have several: a run uploads it again
    when its keys or values changed)."""
    out: dict[str, list[bytes]] = {}
    moto.fs.invalidate_cache()  # the test's own client listed the store before
    for obj in moto.fs.find(f"{prefix}/artifacts"):
        name, _, digest = obj.rpartition(",")
        body = moto.fs.cat_file(obj)
        assert hashlib.sha256(body).hexdigest() == digest, obj
        out.setdefault(name.split("/artifacts/", 1)[1], []).append(body)
    return out


def _check_records_are_stored(root: Path, moto: Moto, prefix: str) -> int:
    """Every result the machine recorded is in the store, in an object whose bytes match its
    name's digest and hold the recorded result's bytes, and every recorded asset result is
    in the store's index (so another machine finds it); every result of the index is in the
    store. The number of recorded results."""
    from barca.store.packs import split_range

    objects = _stored_objects(moto, prefix)
    indexed = set()
    for index in moto.fs.find(f"{prefix}/index"):
        for line in moto.fs.cat_file(index).decode().splitlines():
            key, run_hash, _, _, store_key = json.loads(line)
            assert split_range(store_key)[0] in objects, f"indexed {store_key} is not stored"
            indexed.add((store_key, run_hash))
    recorded = db_rows(root, RECORDED)
    for path, run_hash in recorded:
        key = path.removeprefix(".barca/artifacts/")
        file_key, offset, length = split_range(key)
        assert file_key in objects, f"recorded {key} is not in the store"
        bodies = [body if offset is None else body[offset:offset + length]
                  for body in objects[file_key]]
        if "--retailer_versions/" in key:
            # a sensor's observation is not shared, and not uploaded again when only its
            # order changed (the seed's GROUP BY gives its rows in any order): the same keys
            # and values are in the store, perhaps beside another order
            def keyed(data: bytes) -> tuple:
                value = json.loads(data)
                return value["keys"], value["values"]

            assert keyed(result_bytes(root, path)) in [keyed(b) for b in bodies], key
            continue
        assert result_bytes(root, path) in bodies, key
        assert (key, run_hash) in indexed, f"recorded {key} is not in the store's index"
    return len(recorded)


def _truth(tmp_path: Path) -> dict:
    """The pipeline's values on a machine with no store."""
    plain = _machine(tmp_path / "plain")
    return barca(plain, "get", "scored", "pipeline.py", timeout=300).expect(0).json[
        "final_output"]


def test_a_kill_during_uploads_loses_nothing_recorded_and_records_nothing_unstored(
        tmp_path: Path, moto: Moto, monkeypatch: pytest.MonkeyPatch) -> None:
    import test_remote_store as shared

    monkeypatch.setattr(shared, "KEYS", KEYS)
    bucket = moto.bucket()
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}/team"}
    a = _machine(tmp_path / "a")
    proc = start_barca(a, "get", "scored", "pipeline.py", env=env, start_new_session=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # kill -9 the command and its workers (one process group) once results are uploaded
    # and some are recorded, the run far from done
    poll(lambda: _uploaded(moto) and len(_recorded(a)) > 50, "results uploaded and recorded",
         every=0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    wait_for(lambda: not _group(proc.pid), "the killed run's workers to be gone")

    recorded = _check_records_are_stored(a, moto, f"{bucket}/team/default")
    assert 0 < recorded < 2 * KEYS, recorded  # killed mid-run

    again = barca(a, "get", "scored", "pipeline.py", env=env, timeout=300).expect(0).json
    assert again["steps_executed"] <= 2 * KEYS + 2 - recorded  # what it recorded is kept
    assert again["final_output"] == _truth(tmp_path)
    assert _check_records_are_stored(a, moto, f"{bucket}/team/default") >= 2 * KEYS
    # a second machine finds every result in the store
    b = _machine(tmp_path / "b")
    second = barca(b, "get", "scored", "pipeline.py", env=env, timeout=300).expect(0).json
    assert second["steps_executed"] == 1  # its sensor
    assert second["final_output"] == again["final_output"]


def _group(pgid: int) -> list[int]:
    """The live processes of a process group."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and not gone(int(entry.name)):
                out.append(int(entry.name))
    return out


def _start_again(moto: Moto) -> None:
    """The same moto server back on its port, with the objects it held: moto keeps them in
    memory only, so they are put again by replaying the requests it recorded."""
    moto.proc = subprocess.Popen(
        [str(shared_server()), "-H", "127.0.0.1", "-p", str(moto.port)],
        env=dict(os.environ, MOTO_ENABLE_RECORDING="1",
                 MOTO_RECORDER_FILEPATH=str(moto.recording)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    poll(moto._answers, "moto server to answer again", timeout=30)
    urllib.request.urlopen(urllib.request.Request(
        f"{moto.url}/moto-api/recorder/replay-recording", method="POST"), timeout=300).close()


def shared_server() -> Path:
    from conftest import MOTO_SERVER

    return MOTO_SERVER


def test_a_store_that_goes_away_mid_run_fails_cleanly_and_the_next_run_recovers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import test_remote_store as shared

    monkeypatch.setattr(shared, "KEYS", KEYS)
    (tmp_path / "moto").mkdir()
    moto = Moto(tmp_path / "moto")  # its own server: this test stops it
    try:
        moto.fs.mkdir("team")
        env = {**moto.env, "BARCA_REMOTE_URI": "s3://team/x"}
        a = _machine(tmp_path / "a")
        proc = start_barca(a, "get", "scored", "pipeline.py", env=env)
        try:
            poll(lambda: len(_recorded(a)) > 50, "results uploaded and recorded", every=0.01)
            moto.proc.kill()  # the store goes away
            moto.proc.wait(timeout=30)
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()  # its workers end with it
        assert proc.returncode == 3, (out, err)
        error = json.loads(err.strip().splitlines()[-1])["error"]
        assert error.startswith("the artifact store s3://team/x failed to "), error
        recorded = len(_recorded(a))
        assert recorded < 2 * KEYS + 1

        _start_again(moto)
        assert _check_records_are_stored(a, moto, "team/x/default") == recorded
        again = barca(a, "get", "scored", "pipeline.py", env=env, timeout=300).expect(0).json
        assert again["final_output"] == _truth(tmp_path)
        # what the first run indexed but did not record (killed between the two, as
        # run_recorder says) is a hit from the store, not a row here: so every result is
        # either recorded and stored, or found in the store, and the next run computes none
        assert _check_records_are_stored(a, moto, "team/x/default") > recorded
        settled = barca(a, "get", "scored", "pipeline.py", env=env, timeout=300).expect(0).json
        assert settled["steps_executed"] == 1  # the sensor, which observes on every run
    finally:
        moto.stop()
