"""`weight=` and capacity: the steps running at once never hold more than the run's capacity
(`BARCA_CAPACITY`, else `[run] capacity` in barca.toml, else the pool size); a step heavier
than the capacity runs alone; a batch call holds its node's weight for the whole call; `barca
plan` shows the capacity and every node's weight.

Each step marks itself running in `spans/` for a while and records which other steps it saw
running meanwhile, so overlap is read from what the steps saw, never from clocks. A step that
must be allowed to run alongside another waits (up to 60 s) until it has seen one and been
seen by one; a step
that must run alone holds its mark for WAIT seconds, long enough for a wrongly admitted peer
(its worker already started) to show up.
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import barca, edit, write

WAIT = 2.0

SPAN = f"""
import json
import time
from pathlib import Path

SPANS = Path("spans")


def span(name: str, enough: int | None = None) -> None:
    '''Be running as `name` for {WAIT} s, or until `enough` others were seen running at once
    and as many saw this one (at most 60 s then); record the others seen running meanwhile.'''
    SPANS.mkdir(exist_ok=True)
    mark = SPANS / f"{{name}}.running"
    mark.write_text("")
    seen, most = set(), 0
    deadline = time.monotonic() + ({WAIT} if enough is None else 60)
    while time.monotonic() < deadline:
        now = {{p.name[:-len(".running")] for p in SPANS.glob("*.running")}} - {{name}}
        for other in now - seen:
            (SPANS / f"{{other}}.seen-by-{{name}}").write_text("")
        seen |= now
        most = max(most, len(now))
        if enough is not None and most >= enough and \
                len(list(SPANS.glob(f"{{name}}.seen-by-*"))) >= enough:
            break
        time.sleep(0.02)
    mark.unlink()
    (SPANS / f"{{name}}.json").write_text(json.dumps({{"seen": sorted(seen), "most": most}}))
"""


def _spans(root: Path) -> dict[str, dict]:
    """What each step saw, by step name; then forget it."""
    out = {}
    for path in sorted((root / "spans").glob("*")):
        if path.suffix == ".json":
            out[path.stem] = json.loads(path.read_text())
        path.unlink()
    return out


def test_two_weight_2_steps_never_overlap_in_a_pool_of_2(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "span.py": SPAN, "pipeline.py": """
        from barca import asset
        from span import span

        @asset(weight=2)
        def a() -> int:
            span("a")
            return 1

        @asset(weight=2)
        def b() -> int:
            span("b")
            return 2
    """})
    pool = {"BARCA_POOL_SIZE": "2"}
    barca(tmp_path, "get", "a,b", "pipeline.py", env=pool).expect(0)
    assert _spans(tmp_path) == {"a": {"seen": [], "most": 0}, "b": {"seen": [], "most": 0}}

    # the same steps at weight 1 fit together: each waits until it has seen the other
    pipeline = tmp_path / "pipeline.py"
    edit(pipeline, '@asset(weight=2)\ndef a', '@asset(weight=1)\ndef a')
    edit(pipeline, '@asset(weight=2)\ndef b', '@asset()\ndef b')
    edit(pipeline, 'span("a")', 'span("a", enough=1)')
    edit(pipeline, 'span("b")', 'span("b", enough=1)')
    barca(tmp_path, "get", "a,b", "pipeline.py", env=pool).expect(0)
    assert _spans(tmp_path) == {"a": {"seen": ["b"], "most": 1},
                                "b": {"seen": ["a"], "most": 1}}


def test_capacity_comes_from_barca_toml_and_barca_capacity_wins(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "[run]\ncapacity = 1\n", "span.py": SPAN, "pipeline.py": """
        import os
        from barca import asset, partitions
        from span import span

        @asset(partitions={"k": partitions(["k1", "k2"])})
        def part(k: str) -> str:
            span(k, enough=int(os.environ["ENOUGH"]) if os.environ.get("ENOUGH") else None)
            return k
    """})
    pool = {"BARCA_POOL_SIZE": "3"}
    barca(tmp_path, "get", "part", "pipeline.py", env=pool).expect(0)
    assert _spans(tmp_path) == {"k1": {"seen": [], "most": 0}, "k2": {"seen": [], "most": 0}}

    # BARCA_CAPACITY=2 over the file's 1: the two keys run together (each waits to see one)
    got = barca(tmp_path, "get", "part", "pipeline.py", "--refresh", "part",
                env={**pool, "BARCA_CAPACITY": "2", "ENOUGH": "1"}).expect(0)
    assert got.json["steps_executed"] == 2
    assert _spans(tmp_path) == {"k1": {"seen": ["k2"], "most": 1},
                                "k2": {"seen": ["k1"], "most": 1}}


def test_running_weights_stay_within_the_capacity(tmp_path: Path) -> None:
    """Four keys of weight 2 under capacity 4 in a pool of 4: two at a time, never three."""
    write(tmp_path, {"barca.toml": "[run]\ncapacity = 4\n", "span.py": SPAN,
                     "pipeline.py": """
        from barca import asset, partitions
        from span import span

        @asset(partitions={"k": partitions(["k1", "k2", "k3", "k4"])}, weight=2)
        def heavy(k: str) -> str:
            span(k)
            return k
    """})
    barca(tmp_path, "get", "heavy", "pipeline.py", env={"BARCA_POOL_SIZE": "4"}).expect(0)
    spans = _spans(tmp_path)
    assert sorted(spans) == ["k1", "k2", "k3", "k4"]
    assert all(s["most"] <= 1 for s in spans.values()), spans


def test_a_step_heavier_than_the_capacity_runs_alone(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "span.py": SPAN, "pipeline.py": """
        from barca import asset
        from span import span

        @asset()
        def a() -> int:
            span("a")
            return 1

        @asset(weight=5)
        def big() -> int:
            span("big")
            return 5

        @asset()
        def d() -> int:
            span("d", enough=1)
            return 4

        @asset()
        def e() -> int:
            span("e", enough=1)
            return 5
    """})
    got = barca(tmp_path, "get", "a,big,d,e", "pipeline.py",
                env={"BARCA_POOL_SIZE": "2"}).expect(0)
    assert got.json["steps_executed"] == 4
    spans = _spans(tmp_path)
    assert spans["big"] == {"seen": [], "most": 0} and spans["a"] == {"seen": [], "most": 0}
    assert all("big" not in s["seen"] for s in spans.values()), spans
    # after it, the capacity is whole again: d and e run side by side
    assert spans["d"]["seen"] == ["e"] and spans["e"]["seen"] == ["d"]


def test_a_batch_call_holds_its_weight_for_the_whole_call(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "span.py": SPAN, "pipeline.py": """
        from barca import asset, partitions
        from span import span

        @asset(partitions={"k": partitions(["k1", "k2", "k3", "k4"])}, batch=2, weight=2)
        def scored(k: list[str]) -> dict:
            span("+".join(k))
            return {key: len(key) for key in k}
    """})
    got = barca(tmp_path, "get", "scored", "pipeline.py", env={"BARCA_POOL_SIZE": "2"})
    got.expect(0)
    assert got.json["final_output"] == {"k=k1": 2, "k=k2": 2, "k=k3": 2, "k=k4": 2}
    assert _spans(tmp_path) == {"k1+k2": {"seen": [], "most": 0},
                                "k3+k4": {"seen": [], "most": 0}}


def test_plan_shows_the_capacity_and_each_weight(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "[run]\ncapacity = 3\n", "pipeline.py": """
        from barca import asset

        @asset()
        def plain() -> int:
            return 0

        @asset(weight=2)
        def light() -> int:
            return 1

        @asset(inputs={"light": light}, weight=4)
        def heavy(light: int) -> int:
            return light
    """})
    got = barca(tmp_path, "plan", "pipeline.py", env={"BARCA_POOL_SIZE": "2"}).expect(0)
    plan = got.json
    assert (plan["pool_size"], plan["capacity"], plan["capacity_source"]) == \
        (2, 3, "[run] capacity")
    assert plan["weights"] == {"pipeline.py:light": 2, "pipeline.py:heavy": 4}
    message = "'heavy' has weight=4, more than the capacity 3 ([run] capacity); it runs alone"
    assert plan["warnings"] == [{"kind": "over_capacity", "node": "pipeline.py:heavy",
                                 "param": None, "message": message}]
    assert f"[barca] warning: {message}" in got.stderr.splitlines()
    # BARCA_CAPACITY wins over barca.toml; without either, the capacity is the pool size
    plan = barca(tmp_path, "plan", "pipeline.py",
                 env={"BARCA_POOL_SIZE": "2", "BARCA_CAPACITY": "4"}).expect(0).json
    assert (plan["capacity"], plan["capacity_source"], plan["warnings"]) == \
        (4, "BARCA_CAPACITY", [])
    (tmp_path / "barca.toml").write_text("")
    plan = barca(tmp_path, "plan", "pipeline.py", env={"BARCA_POOL_SIZE": "2"}).expect(0).json
    assert (plan["capacity"], plan["capacity_source"]) == (2, "pool size")
    assert [w["node"] for w in plan["warnings"]] == ["pipeline.py:heavy"]
    # a capacity below the pool size caps the workers: the plan's pool size says so
    plan = barca(tmp_path, "plan", "pipeline.py",
                 env={"BARCA_POOL_SIZE": "8", "BARCA_CAPACITY": "3"}).expect(0).json
    assert (plan["pool_size"], plan["capacity"]) == (3, 3)


def test_a_bad_capacity_is_exit_2_naming_it(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": """
        from barca import asset

        @asset()
        def a() -> int:
            return 1
    """})
    bad = barca(tmp_path, "get", "a", "pipeline.py", env={"BARCA_CAPACITY": "0"}).expect(2)
    assert bad.envelope["error"] == "BARCA_CAPACITY='0' is not a positive integer"
    (tmp_path / "barca.toml").write_text("[run]\ncapacity = 0\n")
    bad = barca(tmp_path, "get", "a", "pipeline.py").expect(2)
    assert bad.envelope["error"] == "barca.toml: [run] capacity must be a positive integer, not 0"
    assert not (tmp_path / ".barca" / "metadata.db").exists()
