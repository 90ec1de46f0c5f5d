"""Warnings that never stop a run, each a `[barca] warning:` line on stderr and an entry of
`warnings[]`: an input the function never uses (`unused_input`, on get, run, dry runs and
plan, from the source alone), and a recompute at an unchanged run hash that wrote different
bytes (`bytes_changed`, with `steps[].bytes_changed`), unless the asset says
`deterministic=False`."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, write

UNUSED = """
    from barca import asset, partitions, sensor

    @sensor()
    def tick() -> int:
        return 1

    @asset()
    def raw() -> list:
        return [1, 2, 3]

    @asset(inputs={"raw": raw, "tick": tick})
    def forgets(raw: list, tick: int) -> int:
        return 1

    @asset(inputs={"raw": raw}, partitions={"k": partitions(["a", "b", "c"])})
    def per_key(k: str, raw: list) -> str:
        return k

    @asset(inputs={"raw": raw})
    def in_text(raw: list) -> str:
        return "select count(*) from raw"

    @asset(inputs={"raw": raw})
    def in_fstring(raw: list) -> str:
        return f"{len(raw)} rows"

    @asset(inputs={"_raw": raw})
    def waits(_raw) -> int:
        return 2

    @asset(inputs={"raw": raw})
    def stub(raw: list) -> int:
        '''Not written yet.'''
        ...

    @asset(inputs={"raw": raw})
    def catch_all(raw: list, **rest) -> int:
        return 3
"""


def _message(node: str) -> str:
    return (f"pipeline.py:{node} never uses its input `raw`; it is still computed and loaded "
            f"for every step (name it `_raw` to only wait for it, or remove it)")


def test_an_unused_input_is_a_warning_on_get_dry_run_and_plan(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": UNUSED})
    expected = [{"kind": "unused_input", "node": f"pipeline.py:{node}", "param": "raw",
                 "message": _message(node)} for node in ("forgets", "per_key")]
    dry = barca(tmp_path, "get", "pipeline.py", "--dry-run").expect(0)
    assert dry.json["warnings"] == expected
    got = barca(tmp_path, "get", "pipeline.py").expect(0)
    assert got.json["warnings"] == expected
    lines = got.stderr.splitlines()
    assert [line for line in lines if "never uses" in line] == [
        f"[barca] warning: {_message('forgets')}", f"[barca] warning: {_message('per_key')}"]
    # before any step ran: the first lines of the run
    assert lines.index(f"[barca] warning: {_message('per_key')}") < 2
    plan = barca(tmp_path, "plan", "pipeline.py").expect(0)
    assert plan.json["warnings"] == expected
    assert f"[barca] warning: {_message('forgets')}" in plan.stderr.splitlines()
    # from the source alone: a cached run says it again; a target's cone, only its own
    again = barca(tmp_path, "get", "forgets", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 1  # the sensor
    assert again.json["warnings"] == expected[:1]
    assert barca(tmp_path, "get", "in_text", "pipeline.py").expect(0).json["warnings"] == []
    # status has no warnings
    status = barca(tmp_path, "status", "pipeline.py").expect(0)
    assert "warnings" not in status.json and "never uses" not in status.stderr


RANDOM = """
    import os
    from barca import asset, partitions

    @asset()
    def stable() -> dict:
        return {"x": 1}

    @asset()
    def noisy() -> str:
        return os.urandom(8).hex()

    @asset(deterministic=False)
    def declared() -> str:
        return os.urandom(8).hex()

    @asset(partitions={"k": partitions(["a", "b", "c"])})
    def per_key(k: str) -> str:
        return os.urandom(8).hex() if k != "a" else k
"""


def test_new_bytes_for_an_unchanged_run_hash_are_a_warning(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": RANDOM})
    first = barca(tmp_path, "get", "pipeline.py").expect(0)
    assert first.json["warnings"] == [] and "deterministic" not in first.stderr
    assert not any("bytes_changed" in s for s in first.json["steps"])

    got = barca(tmp_path, "get", "pipeline.py", "--refresh-all").expect(0)
    noisy = ("pipeline.py:noisy produced different bytes for the same code and inputs; the "
             "function is not deterministic (declare deterministic=False if that is expected)")
    per_key = ("pipeline.py:per_key produced different bytes for the same code and inputs "
               "(keys k=b, k=c); the function is not deterministic (declare "
               "deterministic=False if that is expected)")
    assert sorted(got.json["warnings"], key=lambda w: w["node"]) == [
        {"kind": "bytes_changed", "node": "pipeline.py:noisy", "param": None, "message": noisy},
        {"kind": "bytes_changed", "node": "pipeline.py:per_key", "param": None,
         "message": per_key}]
    assert f"[barca] warning: {noisy}" in got.stderr.splitlines()
    assert f"[barca] warning: {per_key}" in got.stderr.splitlines()
    flagged = {s["id"].split(":")[1]: s.get("bytes_changed") for s in got.json["steps"]}
    assert flagged == {"stable": None, "noisy": True, "declared": None, "per_key": True}

    # a missing artifact recomputed is checked too
    for path in (tmp_path / ".barca" / "artifacts").rglob("*"):
        if path.is_file() and "noisy" in str(path):
            path.unlink()
    again = barca(tmp_path, "get", "noisy", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 1
    assert again.json["warnings"] == [{"kind": "bytes_changed", "node": "pipeline.py:noisy",
                                       "param": None, "message": noisy}]
    assert again.json["steps"][0]["bytes_changed"] is True
