"""Issue 32's planning fixes at the driver level (moved from
tests/e2e/test_issue32_wrong_results.py, which keeps the module isolation of real workers):
`collect()` around an underscore-named input hands the list (the name rule used to win), and
a dry run whose `partitions_from` source's stored file is gone plans it again instead of
crashing.
"""

from __future__ import annotations

from conftest import write
from engine_runs import Engine, engine  # noqa: F401 (the fixture)


def test_an_underscore_input_wrapped_in_collect_receives_the_list(engine: Engine) -> None:
    write(engine.root, {"p.py": """
        from barca import asset, collect, partitions

        @asset(partitions={"k": partitions(["x", "y"])})
        def part(k):
            return k.upper()

        @asset(inputs={"_parts": collect(part)})
        def joined(_parts):
            return "".join(sorted(_parts))
    """})
    assert engine.get("joined", "p.py").expect(0).json["final_output"] == "XY"


KEYED = """
    from barca import asset, partitions_from

    @asset()
    def src():
        return ["x", "y"]

    @asset(partitions={"k": partitions_from(src)})
    def per_key(k):
        return k.upper()
"""


def test_a_dry_run_plans_a_key_source_whose_file_is_gone_again(engine: Engine) -> None:
    write(engine.root, {"p.py": KEYED})
    engine.get("per_key", "p.py").expect(0)
    (stored,) = (engine.root / ".barca" / "artifacts").glob("p.py--src/*.json")
    stored.unlink()

    dry = engine.get("per_key", "p.py", dry_run=True)
    steps = dry.steps
    assert (steps["src"]["action"], steps["src"]["reason"]) == ("run", "artifact_missing")
    assert (steps["per_key"]["action"], steps["per_key"]["reason"]) == \
        ("unknown", "partitions_unknown")
    assert not stored.exists()  # a dry run writes nothing

    real = engine.get("per_key", "p.py").expect(0)
    assert real.json["final_output"] == {"k=x": "X", "k=y": "Y"}
    assert real.statuses() == {"src": "ran", "per_key": "cached"}
