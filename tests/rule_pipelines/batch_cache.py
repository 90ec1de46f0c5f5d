"""The batched keyed pipeline of tests/engine/test_batch_cache_rules.py and
tests/e2e/test_batch_caching.py: every batch function appends `[node, keys]` to calls.log."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import write


PIPELINE = """
    import json
    from pathlib import Path
    from barca import asset, collect, partitions_from, sensor

    def _call(node, keys):
        with open("calls.log", "a") as fh:
            fh.write(json.dumps([node, keys]) + "\\n")

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"retailer": partitions_from(versions)}, batch="all")
    def orders(retailer: list[str], versions: dict) -> dict:
        _call("orders", retailer)
        return {r: {"retailer": r, "v": versions[r]} for r in retailer}

    @asset(partitions={"retailer": partitions_from(orders)}, batch="all")
    def scored(retailer: list[str], orders: dict[str, dict]) -> dict:
        _call("scored", retailer)
        return {r: orders[r]["v"] * 10 for r in retailer}

    @asset(inputs={"xs": collect(scored)})
    def total(xs: list) -> list:
        _call("total", [])
        return xs
"""

RETAILERS = ["r1", "r2", "r3", "r4", "r5"]
VERSIONS = {r: i + 1 for i, r in enumerate(RETAILERS)}
EXPECTED = {f"retailer={r}": v * 10 for r, v in VERSIONS.items()}


def setup(root: Path, versions: dict | None = None) -> Path:
    write(root, {"pipeline.py": PIPELINE})
    (root / "versions.json").write_text(json.dumps(versions or VERSIONS))
    return root
