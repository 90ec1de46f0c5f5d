"""Static keys (`partitions([...])`), several dimensions, and where each key's result is stored.

Keys can be written as a literal list, a module constant or any expression; several dimensions
give their cross product, written `dim=value` joined by `,` in dimension-name order. Each key is
its own step with its own artifact in its node's directory,
`.barca/artifacts/<file>--<node>/<dim>_<key>.<run_hash>.<ext>`, whatever characters the key
holds.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import barca, edit, take_executed, write

KEYS = """
    from barca import asset, collect, partitions

    REGIONS = ["emea", "amer"]

    def _ran(name):
        with open("executed.log", "a") as fh:
            fh.write(name + "\\n")

    @asset(partitions={"region": partitions(["emea", "amer", "apac"])})
    def literal(region: str) -> str:
        _ran("literal " + region)
        return "literal-" + region

    @asset(partitions={"region": partitions(REGIONS)})
    def constant(region: str) -> str:
        _ran("constant " + region)
        return "constant-" + region

    @asset(partitions={"n": partitions([str(i * 10) for i in range(3)])})
    def expression(n: str) -> str:
        _ran("expression " + n)
        return "expression-" + n

    @asset(partitions={"region": partitions(["emea", "amer"]), "day": partitions(["d2", "d1"])})
    def multi(region: str, day: str) -> str:
        _ran(f"multi {region} {day}")
        return f"{region}/{day}"

    @asset(inputs={"all": collect(multi)})
    def fan(all: list) -> list:
        _ran("fan")
        return all
"""


@pytest.fixture
def keys(project: Path) -> Path:
    return write(project, {"pipeline.py": KEYS})


def test_literal_constant_and_expression_keys_pass_the_key_as_the_dimension_parameter(
        keys: Path) -> None:
    got = barca(keys, "get", "literal,constant,expression", "pipeline.py").expect(0)
    targets = got.json["targets"]
    assert targets["literal"]["final_output"] == {
        "region=amer": "literal-amer", "region=apac": "literal-apac",
        "region=emea": "literal-emea"}
    assert targets["constant"]["final_output"] == {
        "region=amer": "constant-amer", "region=emea": "constant-emea"}
    assert targets["expression"]["final_output"] == {
        "n=0": "expression-0", "n=10": "expression-10", "n=20": "expression-20"}
    assert {name: s["partitions"]["total"] for name, s in got.steps.items()} == {
        "literal": 3, "constant": 2, "expression": 3}
    assert len(take_executed(keys)) == 8


def test_adding_a_key_to_any_spelling_runs_only_that_key_and_removing_runs_nothing(
        keys: Path) -> None:
    barca(keys, "get", "literal,constant,expression", "pipeline.py").expect(0)
    take_executed(keys)
    edit(keys / "pipeline.py", 'partitions(["emea", "amer", "apac"])',
         'partitions(["apac", "emea", "new", "amer"])')               # reordered + added
    edit(keys / "pipeline.py", 'REGIONS = ["emea", "amer"]', 'REGIONS = ["amer", "x"]')
    edit(keys / "pipeline.py", "range(3)", "range(4)")
    got = barca(keys, "get", "literal,constant,expression", "pipeline.py").expect(0)
    assert got.json["steps_executed"] == 3
    assert {n: s["partitions"]["will_run_keys"] for n, s in got.steps.items()} == {
        "literal": ["region=new"], "constant": ["region=x"], "expression": ["n=30"]}
    assert take_executed(keys) == ["constant x", "expression 30", "literal new"]
    # the removed key (constant emea) is no longer returned
    assert got.json["targets"]["constant"]["final_output"] == {
        "region=amer": "constant-amer", "region=x": "constant-x"}


def test_several_dimensions_are_a_cross_product_keyed_in_dimension_name_order(
        keys: Path) -> None:
    got = barca(keys, "get", "multi", "pipeline.py").expect(0)
    assert got.json["final_output"] == {
        "day=d1,region=amer": "amer/d1", "day=d1,region=emea": "emea/d1",
        "day=d2,region=amer": "amer/d2", "day=d2,region=emea": "emea/d2"}
    assert got.steps["multi"]["partitions"]["total"] == 4
    assert take_executed(keys) == ["multi amer d1", "multi amer d2",
                                   "multi emea d1", "multi emea d2"]

    run_id = got.json["run_id"]
    steps = barca(keys, "history", run_id, "--json").expect(0).json["steps"]
    assert sorted(s["partition_key"] for s in steps) == [
        "day=d1,region=amer", "day=d1,region=emea", "day=d2,region=amer", "day=d2,region=emea"]

    # collect: sorted by key label (day=..,region=..), not in the declared order of either
    fan = barca(keys, "get", "fan", "pipeline.py").expect(0)
    assert fan.json["final_output"] == ["amer/d1", "emea/d1", "amer/d2", "emea/d2"]


def test_a_dimension_that_is_not_a_parameter_is_a_usage_error(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset, partitions

        @asset(partitions={"region": partitions(["a"])})
        def nope(k: str) -> str:
            return k
    """})
    bad = barca(project, "get", "nope", "p.py").expect(2)
    assert "region" in bad.envelope["error"]
    assert bad.envelope["kind"] == "usage"
    assert not (project / ".barca" / "artifacts").exists() or not any(
        (project / ".barca" / "artifacts").iterdir())


def test_a_key_expression_that_raises_is_a_usage_error_naming_the_node(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset, partitions

        def regions():
            raise RuntimeError("no regions today")

        @asset(partitions={"region": partitions(regions())})
        def broken(region: str) -> str:
            return region
    """})
    bad = barca(project, "get", "broken", "p.py").expect(2)
    assert "p.py:broken" in bad.envelope["error"]
    assert "no regions today" in bad.envelope["error"]
    assert bad.stdout == ""


ARTIFACTS = """
    from barca import asset, partitions, partitions_from

    class Box:
        def __init__(self, v):
            self.v = v

    @asset(partitions={"region": partitions(["emea", "amer"])})
    def sales(region: str) -> dict:
        return {"region": region}

    @asset(partitions={"region": partitions_from(sales)})
    def boxed(region: str, sales: dict) -> object:
        return Box(sales["region"])
"""


def test_each_key_has_its_own_artifact_named_file_node_dim_key_run_hash(project: Path) -> None:
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
    assert json.loads(only.read_text()) == {"region": "amer"}
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
            return "v:" + k
    """})
    (project / "keys.json").write_text(json.dumps(ODD_KEYS))
    assert len("x" * 300) == 300 and len(("日本語" * 40).encode()) == 360

    got = barca(project, "get", "value", "pipeline.py").expect(0)
    assert got.json["final_output"] == {f"k={k}": f"v:{k}" for k in ODD_KEYS}

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
    assert contents == sorted(f"v:{k}" for k in ODD_KEYS)

    # each key's value reads back under its own name: from its own recorded artifact...
    steps = barca(project, "history", got.json["run_id"], "--json").expect(0).json["steps"]
    for step in steps:
        if step["node_id"] != "pipeline.py:value":
            continue
        key = step["partition_key"].removeprefix("k=")
        path = (project / step["artifact_path"]).resolve()
        assert path.is_relative_to(artifacts)
        assert json.loads(path.read_text()) == f"v:{key}"
    # ...and from cache on the next run
    again = barca(project, "get", "value", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 0
    assert again.json["final_output"] == got.json["final_output"]


def test_multi_dimension_values_holding_commas_and_equals_signs_are_passed_whole(
        project: Path) -> None:
    write(project, {"pipeline.py": """
        from barca import asset, partitions

        @asset(partitions={"city": partitions(["Paris, FR", "a=b"]), "day": partitions(["1", "2"])})
        def multi(city: str, day: str) -> dict:
            return {"city": city, "day": day}
    """})
    got = barca(project, "get", "multi", "pipeline.py").expect(0)
    assert got.json["final_output"] == {
        f"city={c},day={d}": {"city": c, "day": d}
        for c in ("Paris, FR", "a=b") for d in ("1", "2")}
    assert len(list((project / ".barca/artifacts/pipeline.py--multi").iterdir())) == 4


def test_a_value_that_looks_like_another_dimension_is_still_passed_whole(project: Path) -> None:
    write(project, {"pipeline.py": """
        from barca import asset, partitions

        @asset(partitions={"region": partitions(["x,day=2"]), "day": partitions(["1", "2"])})
        def multi(region: str, day: str) -> dict:
            return {"region": region, "day": day}
    """})
    got = barca(project, "get", "multi", "pipeline.py").expect(0)
    assert got.json["final_output"] == {
        "day=1,region=x,day=2": {"region": "x,day=2", "day": "1"},
        "day=2,region=x,day=2": {"region": "x,day=2", "day": "2"}}
    assert len(list((project / ".barca/artifacts/pipeline.py--multi").iterdir())) == 2
