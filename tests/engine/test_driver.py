"""The driver and coordinator, driven by the in-process executor: a real project, a real SQLite
file, steps run in this process. The process stands in another directory than the project
(the run is told the project's with `cwd=`), and the run must not change that."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from barca.engine import driver
from barca.engine.events import Reporter
from barca.engine.inprocess import InProcessExecutor
from barca.errors import UsageError
from barca.views.warning_text import warning_json, warning_text

PIPELINE = '''
import json
import pathlib
from barca import asset, partitions_from, sensor

@sensor()
def versions() -> dict:
    return json.loads((pathlib.Path(__file__).parent / "versions.json").read_text())

@asset(partitions={"retailer": partitions_from(versions)})
def cleaned(retailer: str, versions: str) -> str:
    return f"{retailer}@{versions}"

@asset()
def base() -> int:
    return 20

@asset(inputs={"base": base})
def total(base: int) -> int:
    return base + 1
'''


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "barca.toml").write_text("")
    (root / "p.py").write_text(textwrap.dedent(PIPELINE))
    (root / "versions.json").write_text(json.dumps({"r1": "v1", "r2": "v1", "r3": "v1"}))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return root


def get(root: Path, target: str | None, **options):
    executors: list[InProcessExecutor] = []

    def new_executor() -> InProcessExecutor:
        executors.append(InProcessExecutor(root))
        return executors[-1]

    result = driver.run("get", target, ["p.py"], cwd=root, new_executor=new_executor,
                        **options)
    return result, len(executors)


def test_a_run_computes_then_serves_from_cache_without_starting_an_executor(project):
    cwd = os.getcwd()
    result, started = get(project, "total")
    assert os.getcwd() == cwd
    assert (result.status, result.executed, started) == ("success", 2, 1)
    assert result.values(result.final_node()) == 21
    assert (project / ".barca" / "metadata.db").is_file()
    again, started = get(project, "total")
    assert (again.executed, started) == (0, 0)  # fully cached: no executor at all
    assert again.values("p.py:total") == 21


def test_keyed_partitions_run_only_the_key_that_changed(project):
    first, _ = get(project, "cleaned")
    assert first.executed == 4  # the sensor and three keys
    assert first.values("p.py:cleaned") == {"retailer=r1": "r1@v1", "retailer=r2": "r2@v1",
                                            "retailer=r3": "r3@v1"}
    (project / "versions.json").write_text(json.dumps({"r1": "v1", "r2": "v2", "r3": "v1"}))
    second, _ = get(project, "cleaned")
    plan = second.plans["p.py:cleaned"]
    assert [plan.keys[i] for i in plan.run] == ["r2"]
    assert second.values("p.py:cleaned")["retailer=r2"] == "r2@v2"


def test_a_dry_run_executes_only_sensors_and_writes_nothing(project):
    result, _ = get(project, "cleaned", dry_run=True)
    assert result.status == "dry_run"
    assert [result.plans["p.py:cleaned"].keys[i] for i in result.plans["p.py:cleaned"].run] \
        == ["r1", "r2", "r3"]
    assert not (project / ".barca").exists()


def test_a_bad_request_is_a_usage_error_before_anything_runs(project):
    with pytest.raises(UsageError, match="unknown target"):
        get(project, "nothing_like_this")
    assert not (project / ".barca" / "metadata.db").exists()


def test_steps_name_results_by_store_keys_and_the_store_by_a_relative_address(project):
    """So that an executor on another machine resolves them against its own copy (or its own
    connection to the store): no local path in a step."""
    seen = []

    class Recording(InProcessExecutor):
        def submit(self, steps, count, first=False):
            steps = list(steps)
            seen.extend(steps)
            super().submit(steps, count, first)

    result = driver.run("get", "total", ["p.py"], cwd=project,
                        new_executor=lambda: Recording(project))
    assert result.values("p.py:total") == 21
    total = next(s for s in seen if s.node_id == "p.py:total")
    [ref] = total.inputs
    assert ref.paths[0].startswith("p.py--base/") and ref.paths[0].endswith(".json")
    assert total.artifact_stem.startswith("p.py--total/")
    assert total.store == ".barca/artifacts" and not total.scratch


def test_a_run_id_already_recorded_is_refused_and_its_row_kept(project):
    """A server names its runs before they start; an id already recorded must not overwrite
    that run's row or add steps to it."""
    import sqlite3

    result, _ = get(project, "total", run_id="a1b2c3d4e5f6")
    assert (result.run_id, result.status) == ("a1b2c3d4e5f6", "success")

    def rows():
        with sqlite3.connect(project / ".barca" / "metadata.db") as conn:
            return (conn.execute("SELECT * FROM runs").fetchall(),
                    conn.execute("SELECT * FROM materializations ORDER BY id").fetchall())

    before = rows()
    assert len(before[1]) == 2
    with pytest.raises(UsageError, match="run id 'a1b2c3d4e5f6' is already a recorded run") \
            as refused:
        get(project, "total", refresh_all=True, run_id="a1b2c3d4e5f6")
    assert "leave run_id out" in refused.value.remediation
    assert rows() == before


def test_warnings_reach_the_reporter_as_codes_with_evidence_worded_by_the_view(project):
    """The engine says what it saw (a code, the node, the facts); only barca.views words it,
    as the `[barca] warning:` lines and the JSON `message` say it."""
    (project / "p.py").write_text(textwrap.dedent(PIPELINE) + textwrap.dedent('''
        @asset(inputs={"base": base})
        def ignores(base: int) -> int:
            return 1
        '''))
    get(project, "ignores")
    for stored in (project / ".barca" / "artifacts" / "p.py--base").iterdir():
        stored.unlink()  # the cached result `ignores` reads is gone: computed again, and said
    heard: list[tuple[str, dict]] = []

    class Heard(Reporter):
        def warning(self, code, evidence):
            heard.append((code, dict(evidence)))

    result, _ = get(project, "ignores", refresh="ignores", reporter=Heard())
    assert result.status == "success"
    assert [(code, e["node"], e["param"]) for code, e in heard] == [
        ("unused_input", "p.py:ignores", "base"), ("missing_result", "p.py:base", None)]
    assert "message" not in heard[0][1] and "message" not in heard[1][1]
    assert warning_text(*heard[0]) == (
        "p.py:ignores never uses its input `base`; it is still computed and loaded for every "
        "step (name it `_base` to only wait for it, or remove it)")
    location = heard[1][1]["location"]
    assert location.endswith(".json") and "p.py--base" in location
    assert warning_text(*heard[1]) == \
        f"p.py:base: cached result of the node is missing ({location}); computing it again"
    assert [warning_json(w)["message"] for w in result.warnings] == [warning_text(*heard[0])]


def test_a_run_lets_go_of_the_metadata_database_when_it_returns(project):
    """An in-process caller (the Python API) keeps no connection open after a run: no file
    descriptor on the database, and its WAL checkpointed away."""
    import gc

    gc.disable()  # a connection closed only by garbage collection would pass unnoticed
    try:
        get(project, "total")
        db = project / ".barca" / "metadata.db"
        open_files = {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                      if os.path.exists(f"/proc/self/fd/{fd}")}
        assert str(db.resolve()) not in open_files
        assert not db.with_name("metadata.db-wal").exists()
    finally:
        gc.enable()


def test_an_interrupt_that_python_wraps_on_its_way_still_cancels_the_run(project):
    """Ctrl-C reaching the run while a class body is defined (an import of the executor's
    modules): Python 3.11 wraps the interrupt raised in `__set_name__` in a RuntimeError. The
    run is cancelled (exit 130), as for any Ctrl-C, not failed with a traceback."""
    import signal
    import sqlite3

    from barca.errors import Cancelled

    class Interrupting:
        def __set_name__(self, owner, name):
            os.kill(os.getpid(), signal.SIGINT)
            while True:  # the handler raises the run's interrupt at the next instruction
                pass

    def new_executor() -> InProcessExecutor:
        type("Defined", (), {"field": Interrupting()})  # as a dataclass in an import
        raise AssertionError("the interrupt did not come")

    with pytest.raises(Cancelled) as raised:
        driver.run("get", "total", ["p.py"], cwd=project, new_executor=new_executor)
    assert raised.value.exit_code == 130
    with sqlite3.connect(project / ".barca" / "metadata.db") as conn:
        assert conn.execute("SELECT status FROM runs").fetchall() == [("cancelled",)]
