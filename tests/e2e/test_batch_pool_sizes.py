"""Batch calls beside single-key steps under BARCA_POOL_SIZE=1, 2 and 16 (issue 14; `barca docs
batch`, "What stays the same": one call is one step, the calls of a node run in parallel up
to the pool).

In one phase a batched node (batch=3 over a keyed source) sits beside an unbatched node over
the same keys and an unpartitioned asset; in the next phase a batched node reads both and an
unbatched collect reads it. Each pool size runs cold, then after keys changed, were added and
removed, then with `--batch none`. Every run must finish within its timeout (a call that never
gets a worker, or a worker that waits for a lease it never gets, fails the test instead of
stalling it), every batch call must receive a list, the calls must be the same, and the
outputs must be identical under every pool size.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import barca, write

PIPELINE = """
    import json
    import os
    from pathlib import Path
    from barca import asset, collect, partitions_from, sensor

    def _call(node, keys):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps([node, type(keys).__name__, keys]) + "\\n")
        with open("pids.log", "a") as fh:          # which worker process ran this
            fh.write(f"{os.getpid()}\\n")

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset()
    def factor() -> int:
        return 3

    @asset(partitions={"k": partitions_from(versions)}, batch=3)
    def orders(k: list[str], versions: dict) -> dict:
        _call("orders", k)
        return {key: versions[key] for key in k}

    @asset(partitions={"k": partitions_from(versions)})
    def plain(k: str, versions) -> int:
        with open("pids.log", "a") as fh:
            fh.write(f"{os.getpid()}\\n")
        return versions + 1

    @asset(partitions={"k": partitions_from(orders)}, inputs={"factor": factor, "plain": plain},
           batch="all")
    def scored(k: list[str], orders: dict[str, int], plain: dict[str, int], factor: int) -> dict:
        _call("scored", k)
        return {key: orders[key] * factor + plain[key] for key in k}

    @asset(inputs={"xs": collect(scored)})
    def total(xs: list) -> dict:
        return {"n": len(xs), "sum": sum(xs), "xs": xs}
"""

COLD = {f"k{i:02d}": i for i in range(10)}
WARM = {**{k: v for k, v in COLD.items() if k != "k04"}, "k02": 100, "k07": 100, "k10": 10}


def take_calls(root: Path) -> list[list]:
    log = root / "calls.log"
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    log.unlink(missing_ok=True)
    assert all(kind == "list" for _, kind, _ in calls), calls
    return sorted([node, keys] for node, _, keys in calls)


def take_workers(root: Path) -> int:
    """How many worker processes ran calls and single-key steps since the last look."""
    log = root / "pids.log"
    pids = set(log.read_text().split())
    log.unlink()
    return len(pids)


def expected_total(versions: dict) -> dict:
    xs = [v * 3 + v + 1 for _, v in sorted(versions.items())]
    return {"n": len(xs), "sum": sum(xs), "xs": xs}


def chunks(keys: list[str], n: int) -> list[list[str]]:
    return [keys[i:i + n] for i in range(0, len(keys), n)]


@pytest.mark.parametrize("pool", [1, 2, 16])
def test_batched_and_single_key_steps_share_the_pool(tmp_path: Path, pool: int) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": PIPELINE})
    env = {"BARCA_POOL_SIZE": str(pool)}

    def get(*args: str) -> dict:
        return barca(tmp_path, "get", "total", "pipeline.py", *args, env=env,
                     timeout=90).expect(0).json

    (tmp_path / "versions.json").write_text(json.dumps(COLD))
    cold = get()
    keys = sorted(COLD)
    assert cold["final_output"] == expected_total(COLD)
    assert cold["steps_executed"] == 1 + 1 + 10 + 10 + 10 + 1
    assert take_calls(tmp_path) == sorted([["orders", c] for c in chunks(keys, 3)] +
                                          [["scored", keys]])
    workers = take_workers(tmp_path)
    if pool == 1:
        assert workers == 1   # the pool size took effect: one worker ran every call and key
    if pool == 16:
        assert workers > 1

    (tmp_path / "versions.json").write_text(json.dumps(WARM))
    warm = get()
    assert warm["final_output"] == expected_total(WARM)
    assert take_calls(tmp_path) == [["orders", ["k02", "k07", "k10"]],
                                    ["scored", ["k02", "k07", "k10"]]]
    assert take_workers(tmp_path) == 1 or pool > 1

    (tmp_path / "versions.json").write_text(json.dumps({**WARM, "k01": 50, "k09": 50}))
    none = get("--batch", "none")
    assert none["final_output"] == expected_total({**WARM, "k01": 50, "k09": 50})
    assert take_calls(tmp_path) == [["orders", ["k01"]], ["orders", ["k09"]],
                                    ["scored", ["k01"]], ["scored", ["k09"]]]
    assert take_workers(tmp_path) == 1 or pool > 1
