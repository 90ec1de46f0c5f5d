"""The pipelines of tests/engine/test_keyed_rules.py and tests/e2e/test_partitions_keyed_sources.py:
a source returning each kind of value, and a chain of keyed assets under a sensor."""

from __future__ import annotations

from pathlib import Path


MODES = """
    from pathlib import Path
    from barca import asset, partitions_from, sensor

    @sensor()
    def src() -> dict:
        mode = Path("mode.txt").read_text().strip()
        if mode == "good":
            return {1: "one", 2: "two"}
        if mode == "good3":
            return {1: "one", 2: "two", 3: "three"}
        if mode == "set":
            return {1: "one", 2: {"not", "json"}}
        if mode == "nan":
            return {1: "one", "oops": float("nan")}
        if mode == "object":
            return {1: "one", "weird": object()}
        if mode == "collide":
            return {1: "one", "1": "uno"}
        if mode == "bool":
            return {True: "yes"}
        if mode == "bigint":
            return {1: 2 ** 70}

    @asset(partitions={"k": partitions_from(src)})
    def use(k: str, src) -> str:
        with open("executed.log", "a") as fh:
            fh.write(k + "\\n")
        return f"{type(k).__name__}:{k}:{src}"
"""

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
        _ran("cleaned " + k)
        return {"k": k, "v": versions}

    @asset(partitions={"k": partitions_from(cleaned)})
    def scored(k: str, cleaned: dict) -> str:
        _ran("scored " + k)
        return f"{k}:{json.dumps(cleaned['v'], sort_keys=True)}"

    @asset(inputs={"all": collect(scored)})
    def summary(all: list) -> list:
        _ran("summary")
        return all
"""


def write_versions(root: Path, text: str) -> None:
    (root / "versions.json").write_text(text)
