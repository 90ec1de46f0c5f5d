"""The pipelines of tests/engine/test_partition_selection_rules.py,
tests/e2e/test_partitions_selection.py and tests/e2e/test_partitions_failed_keys.py."""

PIPELINE = """
    from barca import asset, collect, partitions, partitions_from

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={"k": partitions(["a", "b", "c", "d"])})
    def load(k: str) -> str:
        _ran("load " + k)
        return "v-" + k

    @asset(partitions={"k": partitions_from(load)})
    def score(k: str, load: str) -> str:
        _ran("score " + k)
        return load + "!"

    @asset(inputs={"all": collect(score)})
    def total(all: list) -> list:
        _ran("total")
        return all

    @asset(partitions={"region": partitions(["emea", "amer"]), "day": partitions(["d1", "d2"])})
    def grid(region: str, day: str) -> str:
        _ran(f"grid {region} {day}")
        return f"{region}/{day}"
"""


# failed keys: a key fails when a file `fail_<key>` exists in the project
FAILING = """
    from pathlib import Path
    from barca import asset, collect, partitions, partitions_from

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={"k": partitions(["a", "b", "c", "d"])})
    def load(k: str) -> str:
        _ran("load " + k)
        if Path("fail_" + k).exists():
            raise ValueError("boom on " + k)
        return "v-" + k

    @asset(partitions={"k": partitions_from(load)})
    def score(k: str, load: str) -> str:
        _ran("score " + k)
        return load + "!"

    @asset(inputs={"all": collect(score)})
    def total(all: list) -> list:
        _ran("total")
        return all
"""
