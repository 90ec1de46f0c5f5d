"""Readers that start before their inputs end (engine.key_streams), at the driver level with
the in-process executor, the real step runner and the project's SQLite file: a partitioned
node reading running partitioned nodes key for key runs a key once the keys it reads
succeeded, its steps ahead of those queued, so each key goes down the chain before the next
key starts. The in-process executor runs one step at a time in the order it draws them, so the
order the steps ran in (each appends to `executed.log`) shows when each was dispatched.
"""

from __future__ import annotations

from conftest import lines, take_executed, write
from engine_runs import engine  # noqa: F401 (the fixture)

CHAIN = """
    from pathlib import Path
    from barca import asset, collect, partitions, partitions_from

    def ran(name, key):
        with open("executed.log", "a") as fh:
            fh.write(f"{name} {key}\\n")

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def source(k: str) -> dict:
        ran("source", k)
        if Path(f"fail-{k}").exists():
            raise ValueError(f"source {k} broke")
        return {"k": k}

    @asset(partitions={"k": partitions_from(source)})
    def middle(k: str, source: dict) -> dict:
        ran("middle", k)
        return {**source, "middle": True}

    @asset(partitions={"k": partitions_from(middle)})
    def last(k: str, middle: dict) -> str:
        ran("last", k)
        return f"{middle['k']}!"

    @asset(inputs={"items": collect(source)})
    def everything(items: list) -> int:
        ran("everything", "")
        return len(items)

    @asset(partitions={"k": partitions_from(source)},
           inputs={"source": source, "everything": everything})
    def with_total(k: str, source: dict, everything: int) -> str:
        ran("with_total", k)
        return f"{source['k']}/{everything}"

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def other(k: str) -> str:
        ran("other", k)
        return k.upper()

    @asset(partitions={"k": partitions_from(source)}, inputs={"source": source, "other": other})
    def joined(k: str, source: dict, other: str) -> str:
        ran("joined", k)
        return source["k"] + other
"""


def executed_in_order(root) -> list[str]:
    out = lines(root / "executed.log")
    (root / "executed.log").unlink()
    return out


def test_each_key_goes_down_the_chain_before_the_next_key_starts(engine):
    write(engine.root, {"pipeline.py": CHAIN})
    ran = engine.get("last", "pipeline.py").expect(0)
    assert executed_in_order(engine.root) == [
        "source a", "middle a", "last a", "source b", "middle b", "last b",
        "source c", "middle c", "last c"]
    assert ran.json["final_output"] == {"k=a": "a!", "k=b": "b!", "k=c": "c!"}
    again = engine.get("last", "pipeline.py").expect(0)  # recorded as usual: all cached
    assert take_executed(engine.root) == []
    assert again.json["final_output"] == ran.json["final_output"]


def test_a_failed_input_key_blocks_only_its_readers_keys_and_the_rest_stream(engine):
    write(engine.root, {"pipeline.py": CHAIN, "fail-b": ""})
    ran = engine.get("last", "pipeline.py").expect(1)
    assert executed_in_order(engine.root) == [
        "source a", "middle a", "last a", "source b", "source c", "middle c", "last c"]
    assert ran.result.skipped == {"pipeline.py:middle": ["b"], "pipeline.py:last": ["b"]}
    (engine.root / "fail-b").unlink()
    engine.get("last", "pipeline.py").expect(0)  # only the failed key and what it blocked
    assert executed_in_order(engine.root) == ["source b", "middle b", "last b"]


def test_a_reader_of_a_whole_node_still_running_waits_for_it(engine):
    """`with_total` reads `source` key for key but `everything` whole (which itself reads
    every key of `source`): none of its keys runs before `everything` has."""
    write(engine.root, {"pipeline.py": CHAIN})
    engine.get("with_total", "pipeline.py").expect(0)
    order = executed_in_order(engine.root)
    assert order[:4] == ["source a", "source b", "source c", "everything "]
    assert sorted(order[4:]) == ["with_total a", "with_total b", "with_total c"]


def test_a_reader_of_keys_cached_upstream_runs_them_once_its_input_is_done(engine):
    """A key whose input key is cached (not run here) waits for its input to end, then runs
    as any dispatched key does; a key whose input key ran streams."""
    write(engine.root, {"pipeline.py": CHAIN})
    engine.get("middle", "pipeline.py").expect(0)
    executed_in_order(engine.root)
    (engine.root / "pipeline.py").write_text(
        (engine.root / "pipeline.py").read_text().replace('return f"{middle[\'k\']}!"',
                                                          'return f"{middle[\'k\']}?"'))
    ran = engine.get("last", "pipeline.py").expect(0)
    assert executed_in_order(engine.root) == ["last a", "last b", "last c"]
    assert ran.json["final_output"] == {"k=a": "a?", "k=b": "b?", "k=c": "c?"}


def test_a_cached_input_whose_files_are_gone_is_computed_again_before_its_reader_streams(
        engine):
    write(engine.root, {"pipeline.py": CHAIN})
    engine.get("joined", "pipeline.py").expect(0)
    executed_in_order(engine.root)
    for artifact in (engine.root / ".barca" / "artifacts" / "pipeline.py--other").iterdir():
        artifact.unlink()
    (engine.root / "pipeline.py").write_text(
        (engine.root / "pipeline.py").read_text().replace('{"k": k}', '{"k": k + "2"}'))
    ran = engine.get("joined", "pipeline.py").expect(0)
    assert ran.steps["other"]["reason"] == "artifact_missing"
    assert ran.json["final_output"] == {"k=a": "a2A", "k=b": "b2B", "k=c": "c2C"}
    # `other` is queued behind `source` (planned again once `source` was dispatched); each
    # key of the reader runs once both keys it reads are there
    assert executed_in_order(engine.root) == [
        "source a", "source b", "source c", "other a", "joined a", "other b", "joined b",
        "other c", "joined c"]
