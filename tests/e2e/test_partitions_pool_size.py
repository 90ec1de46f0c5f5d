"""The same keyed pipeline gives the same results and the same run hashes under any pool size.

~200 keys: a keyed source, two mirrored assets and a collect, run cold and then after a few
keys changed, were added and removed, under BARCA_POOL_SIZE=1, 2 and 16. Every barca call has
a timeout, so a hang (a lost lease, a deadlocked pool) fails the test instead of stalling it.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import barca, write

PIPELINE = """
    import json
    import os
    from pathlib import Path
    from barca import asset, collect, partitions_from, sensor

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)})
    def cleaned(k: str, versions) -> dict:
        with open("pids.log", "a") as fh:      # which worker process ran this key
            fh.write(f"{os.getpid()}\\n")
        return {"k": k, "v": versions}

    @asset(partitions={"k": partitions_from(cleaned)})
    def scored(k: str, cleaned: dict) -> int:
        return cleaned["v"] * 2 + int(cleaned["k"][1:])

    @asset(inputs={"all": collect(scored)})
    def total(all: list) -> dict:
        return {"n": len(all), "sum": sum(all), "head": all[:3], "tail": all[-3:]}
"""

N = 200
COLD = {f"k{i:03d}": i for i in range(N)}
WARM = {**{k: v for k, v in COLD.items() if k != "k100"},
        "k007": 1000, "k050": 1000, "k199": 1000, "k200": 5}


def _run(root: Path, pool: int) -> tuple[dict, int]:
    """One `get total` under this pool size: what it reported, and how many workers ran keys."""
    got = barca(root, "get", "total", "pipeline.py", env={"BARCA_POOL_SIZE": str(pool)},
                timeout=60).expect(0)
    pids = root / "pids.log"
    workers = len(set(pids.read_text().split()))
    pids.unlink()
    history = barca(root, "history", got.json["run_id"], "--json", timeout=60).expect(0).json
    assert history["steps_page"]["truncated"] is False
    return {
        "final_output": got.json["final_output"],
        "steps_executed": got.json["steps_executed"],
        "steps": {s["id"]: (s["status"], s.get("run_hash"), s.get("partitions"))
                  for s in got.json["steps"]},
        "run_hashes": sorted((s["node_id"], s["partition_key"], s["run_hash"])
                             for s in history["steps"]),
    }, workers


def _pipeline(root: Path, pool: int) -> tuple[list[dict], list[int]]:
    root.mkdir()
    write(root, {"barca.toml": "", "pipeline.py": PIPELINE})
    (root / "versions.json").write_text(json.dumps(COLD))
    cold, cold_workers = _run(root, pool)
    (root / "versions.json").write_text(json.dumps(WARM))
    warm, warm_workers = _run(root, pool)
    return [cold, warm], [cold_workers, warm_workers]


def test_any_pool_size_gives_identical_outputs_and_run_hashes(tmp_path: Path) -> None:
    runs = {pool: _pipeline(tmp_path / f"pool{pool}", pool) for pool in (1, 2, 16)}
    results = {pool: r for pool, (r, _) in runs.items()}
    workers = {pool: w for pool, (_, w) in runs.items()}

    cold, warm = results[1]
    assert cold["steps_executed"] == 1 + 2 * N + 1
    assert cold["final_output"] == {"n": N, "sum": sum(3 * i for i in range(N)),
                                    "head": [0, 3, 6], "tail": [591, 594, 597]}
    assert len(cold["run_hashes"]) == 1 + 2 * N + 1
    # warm: the sensor, 4 keys of each asset (3 changed, 1 added), the collect
    assert warm["steps_executed"] == 1 + 2 * 4 + 1
    assert warm["steps"]["pipeline.py:cleaned"][2]["will_run_keys"] == [
        "k=k007", "k=k050", "k=k199", "k=k200"]
    assert warm["final_output"]["n"] == N
    assert warm["final_output"]["tail"] == [198 * 3, 2000 + 199, 10 + 200]

    # the pool size took effect: one worker process computed every key under a pool of 1
    # (and several shared the 200 cold keys under a pool of 16)
    assert workers[1] == [1, 1]
    assert workers[16][0] > 1
    for pool in (2, 16):
        assert results[pool] == results[1], f"BARCA_POOL_SIZE={pool} differs from 1"
