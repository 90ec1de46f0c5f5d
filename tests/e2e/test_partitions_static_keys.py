"""Static keys (`partitions([...])`), several dimensions, and where each key's result is stored.

Keys can be written as a literal list, a module constant or any expression; several dimensions
give their cross product, written `dim=value` joined by `,` in dimension-name order. Each key is
its own step with its own artifact in its node's directory,
`.barca/artifacts/<file>--<node>/<dim>_<key>.<run_hash>.<ext>`, whatever characters the key
holds.

End to end against real workers (which write the results): where each key's result is
stored, and key strings hostile as path components. How keys are written and combined is
tested at the driver level in tests/engine/test_partition_key_rules.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import barca, write

ARTIFACTS = """
    from barca import asset, partitions, partitions_from

    class Box:
        def __init__(self, v):
            self.v = v

    PAD = "x" * 70_000  # past the pack threshold: a file of its own per key (store.packs)

    @asset(partitions={"region": partitions(["emea", "amer"])})
    def sales(region: str) -> dict:
        return {"region": region, "pad": PAD}

    @asset(partitions={"region": partitions_from(sales)})
    def boxed(region: str, sales: dict) -> object:
        return Box(sales["region"] + PAD)
"""


def test_each_key_has_its_own_artifact_named_file_node_dim_key_run_hash(project: Path) -> None:
    """A result too big for a pack; a small one shares a pack of its node (test_packs.py)."""
    write(project, {"pipeline.py": ARTIFACTS})
    got = barca(project, "get", "boxed", "pipeline.py").expect(0)
    steps = barca(project, "history", got.json["run_id"], "--json").expect(0).json["steps"]
    assert len(steps) == 4
    for step in steps:
        node = step["node_id"].split(":", 1)[1]
        region = step["partition_key"].removeprefix("region=")
        ext = {"json": "json", "pickle": "pkl"}[step["artifact_format"]]
        expected = f".barca/artifacts/pipeline.py--{node}/region_{region}.{step['run_hash']}.{ext}"
        assert step["artifact_path"] == expected
        assert (project / expected).is_file()
        assert re.fullmatch(r"[0-9a-f]{12,64}", step["run_hash"])
    sales = project / ".barca/artifacts/pipeline.py--sales"
    (only,) = sales.glob("region_amer.*")
    assert json.loads(only.read_text())["region"] == "amer"
    assert {s["artifact_format"] for s in steps if "boxed" in s["node_id"]} == {"pickle"}


# Keys that are hostile as path components, plus near-duplicates that must stay apart.
ODD_KEYS = ["a/b", "../escape", "..", ".", "/abs", "", "with space", "a b", "a_b", "a%20b",
            "%2F", "%", "café", "ключ", "tab\there", "nl\nx", "nul\x00x", "\x1b[31mred",
            "A/B", "a\\b", "~", "x" * 300, "x" * 299 + "y", "日本語" * 40]


def test_any_key_string_stays_inside_its_node_directory_and_never_shares_a_file(
        project: Path) -> None:
    write(project, {"pipeline.py": """
        import json
        from pathlib import Path
        from barca import asset, partitions_from

        @asset()
        def names() -> list:
            return json.loads(Path("keys.json").read_text())

        @asset(partitions={"k": partitions_from(names)})
        def value(k: str) -> str:
            return "v:" + k + "x" * 70_000  # a file of its own per key, not a pack's range
    """})
    (project / "keys.json").write_text(json.dumps(ODD_KEYS))
    assert len("x" * 300) == 300 and len(("日本語" * 40).encode()) == 360

    got = barca(project, "get", "value", "pipeline.py").expect(0)
    assert got.json["final_output"] == {f"k={k}": f"v:{k}" + "x" * 70_000 for k in ODD_KEYS}

    # every file barca wrote is under .barca/, artifacts under .barca/artifacts/
    outside = [p for p in project.rglob("*") if p.is_file() and ".barca" not in p.parts
               and p.name not in ("pipeline.py", "keys.json", "barca.toml")]
    assert outside == []
    artifacts = (project / ".barca" / "artifacts").resolve()
    assert sorted(d.name for d in artifacts.iterdir()) == ["pipeline.py--names",
                                                          "pipeline.py--value"]
    files = list((artifacts / "pipeline.py--value").iterdir())
    assert len(files) == len(ODD_KEYS)  # no two keys share a file
    for f in files:
        assert f.is_file() and len(f.name.encode()) <= 255 and not f.name.startswith(".")
    contents = sorted(json.loads(f.read_text()) for f in files)
    assert contents == sorted(f"v:{k}" + "x" * 70_000 for k in ODD_KEYS)

    # each key's value reads back under its own name: from its own recorded artifact...
    steps = barca(project, "history", got.json["run_id"], "--json").expect(0).json["steps"]
    for step in steps:
        if step["node_id"] != "pipeline.py:value":
            continue
        key = step["partition_key"].removeprefix("k=")
        path = (project / step["artifact_path"]).resolve()
        assert path.is_relative_to(artifacts)
        assert json.loads(path.read_text()) == f"v:{key}" + "x" * 70_000
    # ...and from cache on the next run
    again = barca(project, "get", "value", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 0
    assert again.json["final_output"] == got.json["final_output"]


