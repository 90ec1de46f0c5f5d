"""What every executor promises the coordinator (engine.executor.Executor), held against each
one: the in-process executor and local worker processes (fresh interpreters; the warm pool's
forked workers are covered end to end in tests/e2e/test_warm_pool.py). A new executor (Ray)
joins by adding itself to EXECUTORS.

Steps are real StepSpecs over real pipeline files in a temporary project; the tests run from
another directory, so an executor that depends on the current directory fails them.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Callable

import pytest

from barca.engine.executor import Executor
from barca.engine.inprocess import InProcessExecutor
from barca.engine.local.pool import LocalExecutor
from barca.engine.protocol import InputRef, LogLine, StepOutcome, StepSpec

PIPELINE = '''
import os
from barca import asset, sensor

@asset()
def double(n: int) -> int:
    return n * 2

@asset()
def loud() -> str:
    print("first line")
    print("second", "line")
    return "done"

@asset()
def broken() -> int:
    raise ValueError("this key is bad")

@asset()
def flaky(marker: str) -> str:
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("first attempt fails")
    return "second attempt"

@asset()
def plus_one(upstream: int) -> int:
    return upstream + 1

@asset()
def interrupts() -> int:
    raise KeyboardInterrupt

@sensor()
def versions() -> dict:
    return {"r1": "a", "r2": "b", "r3": "c"}
'''

EXECUTORS: dict[str, Callable[[Path], Executor]] = {
    "in-process": InProcessExecutor,
    "local-processes": lambda root: LocalExecutor(root, pool_size=2, files=("p.py",)),
}


@pytest.fixture(params=sorted(EXECUTORS))
def setup(request, tmp_path: Path, monkeypatch):
    root = tmp_path / "project"
    root.mkdir()
    (root / "p.py").write_text(textwrap.dedent(PIPELINE))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    executor = EXECUTORS[request.param](root)
    yield root, executor
    executor.close()


def spec(function: str, index: int = 0, *, key_args=(), inputs=(), retries: int = 1,
         kind: str = "asset", key_source: bool = False) -> StepSpec:
    return StepSpec(f"p.py:{function}[{index}]", f"p.py:{function}", str(index), index, kind,
                    "p.py", function, tuple(key_args), tuple(inputs),
                    f".barca/artifacts/p.py--{function}/k_{index}.hash{index:04d}",
                    f"hash{index:04d}", None,
                    retries, 0.0, 60.0, key_source)


def drain(executor: Executor, outcomes: int, timeout: float = 60) -> list:
    """Every event until `outcomes` outcomes arrived."""
    events: list = []
    deadline = time.monotonic() + timeout
    while sum(isinstance(e, StepOutcome) for e in events) < outcomes:
        assert time.monotonic() < deadline, f"only {events} within {timeout}s"
        events.extend(executor.events(0.5))
    return events


def only_outcomes(events: list) -> list[StepOutcome]:
    return [e for e in events if isinstance(e, StepOutcome)]


def test_a_step_writes_its_value_under_the_project_root(setup):
    root, executor = setup
    executor.submit([spec("double", key_args=[("n", 21)])], 1)
    [outcome] = only_outcomes(drain(executor, 1))
    assert outcome.status == "success" and outcome.attempts == 1
    assert outcome.format == "json" and outcome.output_hash
    assert outcome.artifact_path == ".barca/artifacts/p.py--double/k_0.hash0000.json"
    assert json.loads((root / outcome.artifact_path).read_text()) == 42
    assert not Path(".barca").exists()  # nothing written where the caller stands


def test_each_submitted_step_gives_one_outcome_and_steps_are_drawn_as_needed(setup):
    _, executor = setup
    drawn = []

    def steps():
        for i in range(40):
            drawn.append(i)
            yield spec("double", i, key_args=[("n", i)])

    executor.submit(steps(), 40)
    assert len(drawn) < 40  # not all at once
    outcomes = only_outcomes(drain(executor, 40))
    assert sorted(o.index for o in outcomes) == list(range(40))
    assert all(o.status == "success" for o in outcomes)
    assert executor.events(0.2) == []  # nothing more comes


def test_a_failing_step_is_an_outcome_with_the_users_traceback(setup):
    _, executor = setup
    executor.submit([spec("broken")], 1)
    [outcome] = only_outcomes(drain(executor, 1))
    assert outcome.status == "failed"
    assert outcome.error_type == "ValueError" and outcome.error_message == "this key is bad"
    assert 'raise ValueError("this key is bad")' in outcome.traceback
    assert "/barca/engine/" not in outcome.traceback


def test_a_steps_own_keyboard_interrupt_is_its_failure_and_the_next_step_runs(setup):
    _, executor = setup
    executor.submit([spec("interrupts", retries=3), spec("double", 1, key_args=[("n", 2)])], 2)
    outcomes = {o.step_id: o for o in only_outcomes(drain(executor, 2))}
    failed = outcomes["p.py:interrupts[0]"]
    assert (failed.status, failed.attempts, failed.error_type) == (
        "failed", 1, "KeyboardInterrupt")
    assert "raise KeyboardInterrupt" in failed.traceback
    assert outcomes["p.py:double[1]"].status == "success"


def test_printed_lines_arrive_tagged_with_the_step_before_its_outcome(setup):
    _, executor = setup
    step = spec("loud")
    executor.submit([step], 1)
    events = drain(executor, 1)
    lines = [(e.step_id, e.stream, e.text) for e in events if isinstance(e, LogLine)]
    assert lines == [(step.step_id, "stdout", "first line"),
                     (step.step_id, "stdout", "second line")]
    assert isinstance(events[-1], StepOutcome)


def test_a_step_is_retried_up_to_its_retries(setup, tmp_path):
    _, executor = setup
    marker = str(tmp_path / "attempted")
    executor.submit([spec("flaky", key_args=[("marker", marker)], retries=2)], 1)
    [outcome] = only_outcomes(drain(executor, 1))
    assert (outcome.status, outcome.attempts) == ("success", 2)


def test_an_input_file_is_read_by_the_step(setup):
    root, executor = setup
    executor.submit([spec("double", key_args=[("n", 5)])], 1)
    [first] = only_outcomes(drain(executor, 1))
    ref = InputRef("upstream", "artifact", (str(root / first.artifact_path),), ("json",))
    executor.submit([spec("plus_one", 1, inputs=[ref])], 1)
    [second] = only_outcomes(drain(executor, 1))
    assert json.loads((root / second.artifact_path).read_text()) == 11


def test_a_key_source_sends_back_its_packed_keys(setup):
    _, executor = setup
    executor.submit([spec("versions", kind="sensor", key_source=True)], 1)
    [outcome] = only_outcomes(drain(executor, 1))
    assert outcome.status == "success" and outcome.format == "keyed-json"
    assert outcome.key_columns.count == 3
    assert len(outcome.key_columns.key_digests) == len(outcome.key_columns.keys) >= 1
