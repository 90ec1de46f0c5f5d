"""What every executor promises the coordinator (engine.executor.Executor), held against each
one over each artifact store (store.artifact_store): the in-process executor and local worker
processes (fresh interpreters; the warm pool's forked workers are covered end to end in
tests/e2e/test_warm_pool.py) and Ray tasks on a two-node cluster of this machine (the
`ray_cluster` fixture, reached through RAY_ADDRESS), over the project's local store and a
`memory://` one. A new executor or store (S3) joins by adding itself to EXECUTORS or STORES.

Steps are real StepSpecs over real pipeline files in a temporary project; the tests run from
another directory, so an executor that depends on the current directory fails them.
"""

from __future__ import annotations

import hashlib
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
from barca.engine.ray_executor import MAX_RETRIES, RayExecutor
from barca.store.artifact_store import ArtifactStore
from barca.store.artifacts import read_result
from barca.store.local_store import LocalStore
from barca.store.memory_store import MemoryStore
from barca.store.packs import split_range

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

@asset()
def big() -> str:
    return "x" * 70_000

@sensor()
def versions() -> dict:
    return {"r1": "a", "r2": "b", "r3": "c"}
'''

EXECUTORS: dict[str, Callable[[Path], Executor]] = {
    "in-process": InProcessExecutor,
    "local-processes": lambda root: LocalExecutor(root, pool_size=2, files=("p.py",)),
    "ray": RayExecutor,
}


STORES: dict[str, Callable[[Path], ArtifactStore]] = {
    "local": lambda root: LocalStore.of_project(root, root / ".barca" / "artifacts"),
    "memory": lambda root: MemoryStore(),
}

# a memory:// store is a dict in the coordinator's process: a worker process cannot reach it
_OTHER_PROCESSES = ("workers in other processes cannot reach a memory:// store (fsspec's "
                    "memory file system lives in one process)")
UNREACHABLE = {("local-processes", "memory"): _OTHER_PROCESSES, ("ray", "memory"): _OTHER_PROCESSES}
PAIRS = [pytest.param((e, s), id=f"{e}-{s}",
                      marks=[pytest.mark.skip(reason=UNREACHABLE[e, s])]
                      if (e, s) in UNREACHABLE else [pytest.mark.ray] if e == "ray" else [])
         for e in sorted(EXECUTORS) for s in sorted(STORES)]


class Setup:
    def __init__(self, root: Path, executor: Executor, store: ArtifactStore) -> None:
        self.root, self.executor, self.store = root, executor, store

    def spec(self, function: str, index: int = 0, *, key_args=(), inputs=(), retries: int = 1,
             kind: str = "asset", key_source: bool = False, source_digest: str = "",
             key: str | None = None) -> StepSpec:
        """A step of key `key` (default: the index as text; "" an unpartitioned node)."""
        key = str(index) if key is None else key
        return StepSpec(f"p.py:{function}[{index}]", f"p.py:{function}", key, index,
                        kind, "p.py", function, tuple(key_args), tuple(inputs),
                        f"p.py--{function}/k_{index}.hash{index:04d}", f"hash{index:04d}", None,
                        retries, 0.0, 60.0, key_source, store=self.store.address,
                        source_digest=source_digest)


@pytest.fixture(params=PAIRS)
def setup(request, tmp_path: Path, monkeypatch):
    executor_name, store_name = request.param
    root = tmp_path / "project"
    root.mkdir()
    (root / "p.py").write_text(textwrap.dedent(PIPELINE))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    if executor_name == "ray":
        monkeypatch.setenv("RAY_ADDRESS", request.getfixturevalue("ray_cluster").address)
    store = STORES[store_name](root)
    executor = EXECUTORS[executor_name](root)
    yield Setup(root, executor, store)
    executor.close()
    if isinstance(store, MemoryStore):
        store.destroy()


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


def test_a_step_writes_its_value_to_the_store_under_its_key(setup):
    setup.executor.submit([setup.spec("double", key_args=[("n", 21)], key="")], 1)
    [outcome] = only_outcomes(drain(setup.executor, 1))
    assert outcome.status == "success" and outcome.attempts == 1
    assert outcome.format == "json" and outcome.output_hash
    assert outcome.artifact_key == "p.py--double/k_0.hash0000.json"
    assert json.loads(setup.store.get(outcome.artifact_key)) == 42
    assert setup.store.names("p.py--double") == {"k_0.hash0000.json"}
    assert not Path(".barca").exists()  # nothing written where the caller stands


def test_a_keys_small_result_is_a_range_of_a_pack_written_before_its_outcome(setup):
    setup.executor.submit([setup.spec("double", 1, key_args=[("n", 21)])], 1)
    [outcome] = only_outcomes(drain(setup.executor, 1))
    pack, offset, length = split_range(outcome.artifact_key)
    assert pack.startswith("p.py--double/") and pack.endswith(".pack")
    assert (offset, length) == (0, outcome.size_bytes) and outcome.size_bytes == 2
    assert json.loads(setup.store.get(outcome.artifact_key)) == 42
    assert read_result(setup.store, outcome.artifact_key, "json") == 42
    assert setup.store.names("p.py--double") == {pack.rpartition("/")[2]}
    setup.executor.submit([setup.spec("big", 2)], 1)  # past PACKED_MAX: a file of its own
    [large] = only_outcomes(drain(setup.executor, 1))
    assert large.artifact_key == "p.py--big/k_2.hash0002.json"
    assert setup.store.get(large.artifact_key) == b'"' + b"x" * 70_000 + b'"'


def test_each_submitted_step_gives_one_outcome_and_steps_are_drawn_as_needed(setup):
    drawn = []

    def steps():
        for i in range(40):
            drawn.append(i)
            yield setup.spec("double", i, key_args=[("n", i)])

    setup.executor.submit(steps(), 40)
    assert len(drawn) < 40  # not all at once
    outcomes = only_outcomes(drain(setup.executor, 40))
    assert sorted(o.index for o in outcomes) == list(range(40))
    assert all(o.status == "success" for o in outcomes)
    assert setup.executor.events(0.2) == []  # nothing more comes
    assert [json.loads(setup.store.get(o.artifact_key)) for o in
            sorted(outcomes, key=lambda o: o.index)] == [2 * i for i in range(40)]


def test_a_failing_step_is_an_outcome_with_the_users_traceback(setup):
    setup.executor.submit([setup.spec("broken")], 1)
    [outcome] = only_outcomes(drain(setup.executor, 1))
    assert outcome.status == "failed"
    assert outcome.error_type == "ValueError" and outcome.error_message == "this key is bad"
    assert 'raise ValueError("this key is bad")' in outcome.traceback
    assert "/barca/engine/" not in outcome.traceback
    assert outcome.artifact_key is None and setup.store.names("p.py--broken") == set()


def test_a_steps_own_keyboard_interrupt_is_its_failure_and_the_next_step_runs(setup):
    setup.executor.submit([setup.spec("interrupts", retries=3),
                           setup.spec("double", 1, key_args=[("n", 2)])], 2)
    outcomes = {o.step_id: o for o in only_outcomes(drain(setup.executor, 2))}
    failed = outcomes["p.py:interrupts[0]"]
    assert (failed.status, failed.attempts, failed.error_type) == (
        "failed", 1, "KeyboardInterrupt")
    assert "raise KeyboardInterrupt" in failed.traceback
    assert outcomes["p.py:double[1]"].status == "success"


def test_printed_lines_arrive_tagged_with_the_step_before_its_outcome(setup):
    step = setup.spec("loud")
    setup.executor.submit([step], 1)
    events = drain(setup.executor, 1)
    lines = [(e.step_id, e.stream, e.text) for e in events if isinstance(e, LogLine)]
    assert lines == [(step.step_id, "stdout", "first line"),
                     (step.step_id, "stdout", "second line")]
    assert isinstance(events[-1], StepOutcome)


def test_a_step_is_retried_up_to_its_retries(setup, tmp_path):
    marker = str(tmp_path / "attempted")
    setup.executor.submit([setup.spec("flaky", key_args=[("marker", marker)], retries=2)], 1)
    [outcome] = only_outcomes(drain(setup.executor, 1))
    assert (outcome.status, outcome.attempts) == ("success", 2)


def test_an_input_is_read_from_the_store_by_its_key(setup):
    setup.executor.submit([setup.spec("double", key_args=[("n", 5)])], 1)
    [first] = only_outcomes(drain(setup.executor, 1))
    ref = InputRef("upstream", "artifact", (first.artifact_key,), ("json",))
    setup.executor.submit([setup.spec("plus_one", 1, inputs=[ref])], 1)
    [second] = only_outcomes(drain(setup.executor, 1))
    assert read_result(setup.store, second.artifact_key, "json") == 11


def test_a_key_source_sends_back_its_packed_keys(setup):
    setup.executor.submit([setup.spec("versions", kind="sensor", key_source=True)], 1)
    [outcome] = only_outcomes(drain(setup.executor, 1))
    assert outcome.status == "success" and outcome.format == "keyed-json"
    assert outcome.key_columns.count == 3
    assert len(outcome.key_columns.key_digests) == len(outcome.key_columns.keys) >= 1
    assert read_result(setup.store, outcome.artifact_key, "keyed-json") == {
        "r1": "a", "r2": "b", "r3": "c"}


def test_a_step_planned_from_other_source_bytes_fails_and_writes_nothing(setup):
    """A worker whose copy of the pipeline file is not the one the run was planned with (a
    stale copy on another machine, or a file edited after planning) fails the step, at once
    (not retried), and writes nothing: new run hashes are never recorded over old code."""
    on_disk = (setup.root / "p.py").read_bytes()
    planned = hashlib.blake2b(on_disk + b"\n# edited\n", digest_size=16).hexdigest()
    current = hashlib.blake2b(on_disk, digest_size=16).hexdigest()
    setup.executor.submit([setup.spec("double", 0, key_args=[("n", 1)], retries=3,
                                      source_digest=planned),
                           setup.spec("double", 1, key_args=[("n", 2)],
                                      source_digest=current)], 2)
    outcomes = {o.index: o for o in only_outcomes(drain(setup.executor, 2))}
    stale = outcomes[0]
    assert (stale.status, stale.attempts, stale.error_type) == ("failed", 1, "SourceChanged")
    assert "p.py is not the source this run was planned with" in stale.error_message
    assert stale.traceback is None
    assert outcomes[1].status == "success"
    pack = split_range(outcomes[1].artifact_key)[0]  # nothing of the stale step in it
    assert setup.store.names("p.py--double") == {pack.rpartition("/")[2]}
    assert len(setup.store.get(pack)) == outcomes[1].size_bytes


@pytest.mark.ray
def test_a_ray_lease_that_cannot_start_fails_its_step_with_the_workers_traceback(
        tmp_path: Path, ray_cluster, monkeypatch) -> None:
    """barca's own error in a lease (here: the project is not where the worker looks) is no
    step's error: as an OSError (which is also how a worker of a dying node fails) it is sent
    again as a lost lease is, then the step fails with the worker's traceback."""
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    missing = tmp_path / "not-on-this-node"
    executor = RayExecutor(missing)
    try:
        setup = Setup(missing, executor, MemoryStore())
        executor.submit([setup.spec("double", key_args=[("n", 1)], key="")], 1)
        [outcome] = only_outcomes(drain(executor, 1))
    finally:
        executor.close()
        setup.store.destroy()
    assert (outcome.status, outcome.error_type) == ("failed", "FileNotFoundError")
    assert outcome.attempts == MAX_RETRIES + 1
    assert str(missing) in outcome.error_message
    assert outcome.traceback.startswith("ray::run_lease()")
    assert "os.chdir(root)" in outcome.traceback
