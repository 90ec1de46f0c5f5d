"""The pipelines of tests/engine/test_semantics_rules.py and tests/e2e/test_contract_semantics.py:
a partition selection around a fan-in, and a Manual asset with its readers."""

SELECTION = """
    from barca import asset, collect, partitions, partitions_from, task

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def load(k: str) -> str:
        _ran("load " + k)
        return "v-" + k

    @asset(inputs={"all": collect(load)})
    def total(all: list) -> int:
        _ran("total")
        return len(all)

    @asset(inputs={"total": total})
    def report(total: int) -> str:
        _ran("report")
        return f"{total} keys"

    @task(inputs={"all": collect(load)})
    def publish(all: list) -> int:
        _ran("publish")
        return len(all)
"""

MANUAL = """
    from pathlib import Path
    from barca import Manual, asset, partitions

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset()
    def base() -> str:
        _ran("base")
        return "base"

    @asset(freshness=Manual, inputs={"base": base})
    def snapshot(base: str) -> str:
        _ran("snapshot")
        return Path("source.txt").read_text()

    @asset(inputs={"snapshot": snapshot})
    def reader(snapshot: str) -> str:
        _ran("reader")
        return snapshot.upper()

    @asset(partitions={"k": partitions(["a", "b"])}, inputs={"snapshot": snapshot})
    def per(k: str, snapshot: str) -> str:
        _ran("per " + k)
        return k + snapshot
"""
