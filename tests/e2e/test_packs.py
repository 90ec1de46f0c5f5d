"""Small results packed (store.packs), end to end through the real `barca` and its workers:
a keyed node's small results share pack files instead of a file each; every reader finds
them (`-o value`, `-o path`, readers downstream, `barca sql`, `history`, the server's output
route); a tick writes only its own key; `gc` keeps a pack while any current key is in it and
removes one that nothing current needs."""

from __future__ import annotations

import json
from pathlib import Path

from barca.store.packs import split_range
from conftest import barca, barca_here, db_rows, result_bytes, write

KEYS = 300
PIPELINE = """
    import json
    from pathlib import Path
    from barca import asset, collect, partitions_from, sensor

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)})
    def item(k: str, versions: int) -> dict:
        return {"k": k, "v": int(k[1:]) + versions}

    @asset(partitions={"k": partitions_from(versions)}, inputs={"item": item})
    def twice(k: str, item: dict) -> int:
        return item["v"] * 2

    @asset(inputs={"all": collect(twice)})
    def total(all: list) -> int:
        return sum(all)
"""
EXPECTED = sum(i * 2 for i in range(KEYS))


def versions(bump: dict | None = None) -> str:
    """Each key's version, added to its value: a key whose version changes reruns."""
    return json.dumps({f"k{i:03d}": (bump or {}).get(f"k{i:03d}", 0) for i in range(KEYS)})


def files_of(project: Path, node: str) -> list[Path]:
    return sorted((project / ".barca" / "artifacts" / f"pipeline.py--{node}").iterdir())


def test_a_keyed_run_packs_its_small_results_and_every_reader_finds_them(project: Path
                                                                         ) -> None:
    write(project, {"pipeline.py": PIPELINE, "versions.json": versions()})
    got = barca(project, "get", "total", "pipeline.py").expect(0)
    assert got.json["final_output"] == EXPECTED  # read downstream through `collect`
    packs = files_of(project, "item")
    assert all(p.suffix == ".pack" for p in packs) and len(packs) < KEYS // 4, len(packs)

    values = barca(project, "get", "twice", "pipeline.py", "-o", "value").expect(0).json
    assert values == {f"k=k{i:03d}": i * 2 for i in range(KEYS)}
    paths = barca(project, "get", "item", "pipeline.py", "-o", "path").expect(0).stdout
    lines = paths.splitlines()
    assert len(lines) == KEYS and all(split_range(line)[1] is not None for line in lines)
    assert json.loads(result_bytes(project, lines[7])) == {"k": "k007", "v": 7}

    history = barca_here(project, "history", got.json["run_id"], "--json", "--limit", "1000")
    steps = {s["step_id"]: s for s in history.expect(0).json["steps"]}
    step = steps["pipeline.py:item[k=k042]"]
    assert json.loads(result_bytes(project, step["artifact_path"])) == {"k": "k042", "v": 42}
    assert step["artifact_size_bytes"] == len(b'{"k":"k042","v":42}')

    sql = barca_here(project, "sql", "select sum(v) as s, count(*) as n from item",
                     "pipeline.py").expect(0).json
    assert sql["rows"] == [{"s": sum(range(KEYS)), "n": KEYS}]
    assert not [p for p in (project / ".barca" / "artifacts").iterdir() if p.name.startswith(".")]


def test_a_tick_writes_only_its_key_and_gc_keeps_each_pack_with_a_current_key(project: Path
                                                                             ) -> None:
    write(project, {"pipeline.py": PIPELINE, "versions.json": versions()})
    barca(project, "get", "total", "pipeline.py").expect(0)
    before = set(files_of(project, "item"))

    write(project, {"versions.json": versions({"k005": 1000})})
    tick = barca(project, "get", "total", "pipeline.py").expect(0)
    assert tick.json["steps_executed"] == 4 and tick.json["final_output"] == EXPECTED + 2000
    new = set(files_of(project, "item")) - before
    assert len(new) == 1 and len(result_bytes(project, str(next(iter(new))))) < 100

    # every pack still holds a current key: gc removes none of them
    kept = barca(project, "gc", "--json").expect(0).json
    assert [e for e in kept["evicted"] if "pipeline.py--item" in e["path"]] == []

    # all keys computed anew: the old packs hold no current key any more, and go
    write(project, {"versions.json": versions({f"k{i:03d}": 1 for i in range(KEYS)})})
    barca(project, "get", "item", "pipeline.py").expect(0)
    removed = barca(project, "gc", "--json").expect(0).json
    gone = {e["path"] for e in removed["evicted"] if "pipeline.py--item" in e["path"]}
    assert gone == {str(p.relative_to(project)) for p in before | new}
    current = {split_range(p)[0] for (p,) in db_rows(
        project, "SELECT artifact_path FROM materializations WHERE node_id = 'pipeline.py:item' "
        "AND status = 'success' ORDER BY id DESC LIMIT ?", (KEYS,))}
    assert {str(p.relative_to(project)) for p in files_of(project, "item")} == current
    again = barca(project, "get", "item", "pipeline.py", "-o", "value").expect(0).json
    assert again["k=k123"] == {"k": "k123", "v": 124}


MIXED = """
    import json
    from pathlib import Path
    from barca import asset, partitions_from, sensor

    @sensor()
    def versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"k": partitions_from(versions)})
    def item(k: str, versions: int) -> str:
        return (k + str(versions)) * (20_000 if int(k[1:]) % 10 == 0 else 1)
"""


def test_paths_of_packed_and_own_file_results_name_each_keys_current_bytes(project: Path
                                                                            ) -> None:
    """`-o path` of a node whose large results have files of their own among packed small
    ones, cached and after a tick that reran two keys (one of each kind)."""
    write(project, {"pipeline.py": MIXED, "versions.json": versions()})
    for bump in ({}, {"k010": 1, "k011": 1}):
        (project / "versions.json").write_text(versions(bump))
        barca(project, "get", "item", "pipeline.py").expect(0)
        paths = barca(project, "get", "item", "pipeline.py", "-o", "path").expect(0).stdout
        lines = paths.splitlines()
        assert len(lines) == KEYS
        for i in (0, 7, 10, 11, 299):
            k = f"k{i:03d}"
            packed = split_range(lines[i])[1] is not None
            assert packed == (i % 10 != 0), lines[i]
            value = (k + str(bump.get(k, 0))) * (20_000 if i % 10 == 0 else 1)
            assert json.loads(result_bytes(project, lines[i])) == value
