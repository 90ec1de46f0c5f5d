"""The pipelines and helpers of tests/engine/test_partition_dry_run_rules.py and
tests/e2e/test_partitions_dry_run.py: a keyed source of 30 keys, and a chain that can fail."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


PIPELINE = """
    import json
    from pathlib import Path
    from barca import asset, partitions_from, sensor

    @sensor()
    def retailer_versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"retailer": partitions_from(retailer_versions)})
    def cleaned(retailer: str, retailer_versions) -> str:
        with open("executed.log", "a") as fh:
            fh.write(retailer + "\\n")
        return f"{retailer}@{retailer_versions}"
"""


# declared in reverse, so that lexical order differs from the dict's order
KEYS = [f"r{i:02d}" for i in reversed(range(30))]


def write_versions(root: Path, changed: range = range(0), new: int = 0) -> None:
    versions = {k: 1 for k in KEYS}
    for i in changed:
        versions[f"r{i:02d}"] = 2
    for i in range(new):
        versions[f"n{i:02d}"] = 0
    (root / "versions.json").write_text(json.dumps(versions))


def store_snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / ".barca").rglob("*")) if p.is_file()}


CHAIN = """
    import json
    from pathlib import Path
    from barca import asset, collect, partitions_from, sensor

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)})
    def cleaned(k: str, versions) -> dict:
        _ran("cleaned k=" + k)
        if versions == "fail":
            raise ValueError("cannot clean " + k)
        return {"k": k, "v": versions}

    @asset(partitions={"k": partitions_from(cleaned)})
    def scored(k: str, cleaned: dict) -> str:
        _ran("scored k=" + k)
        return f"{k}={cleaned['v']}"

    @asset(inputs={"all": collect(scored)})
    def summary(all: list) -> list:
        _ran("summary")
        return all
"""

BASE = {"a": 1, "b": 1, "c": 1, "d": 1}
