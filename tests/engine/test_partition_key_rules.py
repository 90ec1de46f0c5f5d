"""Static keys (`partitions([...])`) and several dimensions, at the driver level (moved from
tests/e2e/test_partitions_static_keys.py, which keeps where each key's result is stored and
hostile key strings against real workers).

Keys can be written as a literal list, a module constant or any expression; several dimensions
give their cross product, written `dim=value` joined by `,` in dimension-name order.
"""

from __future__ import annotations

import pytest

from barca.errors import UsageError
from conftest import barca_here, edit, take_executed, write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)

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
def keys(engine: Engine) -> Engine:
    write(engine.root, {"pipeline.py": KEYS})
    return engine


def test_literal_constant_and_expression_keys_pass_the_key_as_the_dimension_parameter(
        keys: Engine) -> None:
    got = keys.get("literal,constant,expression", "pipeline.py").expect(0)
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
    assert len(take_executed(keys.root)) == 8


def test_adding_a_key_to_any_spelling_runs_only_that_key_and_removing_runs_nothing(
        keys: Engine) -> None:
    root = keys.root
    keys.get("literal,constant,expression", "pipeline.py").expect(0)
    take_executed(root)
    edit(root / "pipeline.py", 'partitions(["emea", "amer", "apac"])',
         'partitions(["apac", "emea", "new", "amer"])')               # reordered + added
    edit(root / "pipeline.py", 'REGIONS = ["emea", "amer"]', 'REGIONS = ["amer", "x"]')
    edit(root / "pipeline.py", "range(3)", "range(4)")
    got = keys.get("literal,constant,expression", "pipeline.py").expect(0)
    assert got.json["steps_executed"] == 3
    assert {n: s["partitions"]["will_run_keys"] for n, s in got.steps.items()} == {
        "literal": ["region=new"], "constant": ["region=x"], "expression": ["n=30"]}
    assert take_executed(root) == ["constant x", "expression 30", "literal new"]
    # the removed key (constant emea) is no longer returned
    assert got.json["targets"]["constant"]["final_output"] == {
        "region=amer": "constant-amer", "region=x": "constant-x"}


def test_several_dimensions_are_a_cross_product_keyed_in_dimension_name_order(
        keys: Engine) -> None:
    got = keys.get("multi", "pipeline.py").expect(0)
    assert got.json["final_output"] == {
        "day=d1,region=amer": "amer/d1", "day=d1,region=emea": "emea/d1",
        "day=d2,region=amer": "amer/d2", "day=d2,region=emea": "emea/d2"}
    assert got.steps["multi"]["partitions"]["total"] == 4
    assert take_executed(keys.root) == ["multi amer d1", "multi amer d2",
                                        "multi emea d1", "multi emea d2"]

    run_id = got.json["run_id"]
    steps = barca_here(keys.root, "history", run_id, "--json").expect(0).json["steps"]
    assert sorted(s["partition_key"] for s in steps) == [
        "day=d1,region=amer", "day=d1,region=emea", "day=d2,region=amer", "day=d2,region=emea"]

    # collect: sorted by key label (day=..,region=..), not in the declared order of either
    fan = keys.get("fan", "pipeline.py").expect(0)
    assert fan.json["final_output"] == ["amer/d1", "emea/d1", "amer/d2", "emea/d2"]


def test_a_dimension_that_is_not_a_parameter_is_a_usage_error(engine: Engine) -> None:
    write(engine.root, {"p.py": """
        from barca import asset, partitions

        @asset(partitions={"region": partitions(["a"])})
        def nope(k: str) -> str:
            return k
    """})
    with pytest.raises(UsageError, match="region") as bad:
        engine.get("nope", "p.py")
    assert bad.value.exit_code == 2
    artifacts = engine.root / ".barca" / "artifacts"
    assert not artifacts.exists() or not any(artifacts.iterdir())


def test_a_key_expression_that_raises_is_a_usage_error_naming_the_node(engine: Engine) -> None:
    write(engine.root, {"p.py": """
        from barca import asset, partitions

        def regions():
            raise RuntimeError("no regions today")

        @asset(partitions={"region": partitions(regions())})
        def broken(region: str) -> str:
            return region
    """})
    with pytest.raises(UsageError) as bad:
        engine.get("broken", "p.py")
    assert "p.py:broken" in bad.value.message
    assert "no regions today" in bad.value.message
    assert not (engine.root / ".barca" / "metadata.db").exists()  # nothing ran


def test_multi_dimension_values_holding_commas_and_equals_signs_are_passed_whole(
        engine: Engine) -> None:
    write(engine.root, {"pipeline.py": """
        from barca import asset, partitions

        @asset(partitions={"city": partitions(["Paris, FR", "a=b"]), "day": partitions(["1", "2"])})
        def multi(city: str, day: str) -> dict:
            return {"city": city, "day": day}
    """})
    got = engine.get("multi", "pipeline.py").expect(0)
    assert got.json["final_output"] == {
        f"city={c},day={d}": {"city": c, "day": d}
        for c in ("Paris, FR", "a=b") for d in ("1", "2")}
    assert len(list((engine.root / ".barca/artifacts/pipeline.py--multi").iterdir())) == 4


def test_a_value_that_looks_like_another_dimension_is_still_passed_whole(
        engine: Engine) -> None:
    write(engine.root, {"pipeline.py": """
        from barca import asset, partitions

        @asset(partitions={"region": partitions(["x,day=2"]), "day": partitions(["1", "2"])})
        def multi(region: str, day: str) -> dict:
            return {"region": region, "day": day}
    """})
    got = engine.get("multi", "pipeline.py").expect(0)
    assert got.json["final_output"] == {
        "day=1,region=x,day=2": {"region": "x,day=2", "day": "1"},
        "day=2,region=x,day=2": {"region": "x,day=2", "day": "2"}}
    assert len(list((engine.root / ".barca/artifacts/pipeline.py--multi").iterdir())) == 2
