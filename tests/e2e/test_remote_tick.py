"""A tick against a shared store sends what changed and nothing else, over moto's S3 server on
loopback: a sensor that observed what this machine uploaded last time uploads nothing, even
with its keys in another order (the tick's only request is the store's check), an observation
that changed is uploaded, and one that comes back to an earlier value is uploaded again (so
that it is the key's newest object in the store, as readers take it). A process that opens the store imports its file system
package only for its first request. Requests are counted from moto's own log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import Moto, barca, require_moto, write

require_moto()

PIPELINE = """
import json
import random
from pathlib import Path

from barca import asset, partitions_from, sensor

HERE = Path(__file__).parent


@sensor
def versions() -> dict:  # in another order on each tick, as a query's GROUP BY gives them
    shops = list(json.loads((HERE / "versions.json").read_text()).items())
    random.shuffle(shops)
    return dict(shops)


@asset(partitions={"shop": partitions_from(versions)})
def doubled(shop: str, versions: str) -> str:
    return versions * 2
"""


def _versions(root: Path, changed: str) -> None:
    shops = {f"s{i:03d}": "v1" for i in range(200)}
    shops["s007"] = changed
    (root / "versions.json").write_text(json.dumps(shops))


def _observation_puts(taken: list[tuple[str, str]]) -> list[str]:
    return [path for method, path in taken
            if method == "PUT" and "/artifacts/pipeline.py--versions/" in path]


def test_a_tick_whose_sensor_saw_nothing_new_uploads_nothing(tmp_path: Path,
                                                             moto: Moto) -> None:
    bucket = moto.bucket()
    env = {**moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}/team"}
    root = write(tmp_path / "a", {"pipeline.py": PIPELINE, "barca.toml": ""})
    _versions(root, "v1")
    first = barca(root, "get", "doubled", "pipeline.py", env=env).expect(0).json
    assert first["steps_executed"] == 201
    assert len(_observation_puts(moto.taken())) == 1

    same = barca(root, "get", "doubled", "pipeline.py", env=env).expect(0).json
    assert same["steps_executed"] == 1  # the sensor, which observes on every tick
    taken = moto.taken()
    assert [method for method, _ in taken] == ["GET"], taken  # the store's check (a listing)

    _versions(root, "v2")  # what it observes changes: the new observation goes up
    tick = barca(root, "get", "doubled", "pipeline.py", env=env).expect(0).json
    assert tick["steps_executed"] == 2
    assert tick["final_output"]["shop=s007"] == "v2v2"
    assert len(_observation_puts(moto.taken())) == 1

    _versions(root, "v1")  # back to the first one, whose object the store still holds:
    back = barca(root, "get", "doubled", "pipeline.py", env=env).expect(0).json
    assert back["final_output"]["shop=s007"] == "v1v1"
    # uploaded again all the same, so that it is the key's newest object there
    assert len(_observation_puts(moto.taken())) == 1
    barca(root, "get", "doubled", "pipeline.py", env=env).expect(0)
    assert [method for method, _ in moto.taken()] == ["GET"]


OPEN_AND_WRITE = """
import sys
from barca.store.artifact_store import open_store

store = open_store("remote:default:.barca/artifacts", ".")
assert "s3fs" not in sys.modules, "opened the file system before any request"
store.observation("pipeline.py--versions/obs.json")
store.put("pipeline.py--versions/obs.json", b'{"s1": "v1"}')
store.observed("pipeline.py--versions/obs.json", "0f" * 16, 12)
print("s3fs" in sys.modules)
"""


def test_a_process_imports_the_file_system_package_only_for_a_request(tmp_path: Path,
                                                                        moto: Moto) -> None:
    bucket = moto.bucket()
    root = write(tmp_path / "a", {"pipeline.py": PIPELINE, "barca.toml": ""})
    env = {**os.environ, **moto.env, "BARCA_REMOTE_URI": f"s3://{bucket}/team"}

    def worker_writes() -> bool:
        done = subprocess.run([sys.executable, "-c", OPEN_AND_WRITE], cwd=root, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip() == "True"

    assert worker_writes()  # the first upload of the observation: s3fs imported for it
    assert len(_observation_puts(moto.taken())) == 1
    assert not worker_writes()  # the same bytes again: no request, nothing imported
    assert moto.taken() == []
