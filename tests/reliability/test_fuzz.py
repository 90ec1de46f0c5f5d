"""The fuzz corpus of issue 13 (tests/reliability/fuzz_corpus.py) on the real CLI.

Every case is answered in a project of its own: exit 2 naming the cause (or a failed step
naming it, for what only a run can see), never a traceback with a frame of barca's own code.
The command cases are refusals: each is answered by barca's entry point in this process
(`barca_here`, one after the other), and a sample of generated ones by real `barca`
processes, two at a time. The values only a run can see (key sources, results that cannot be
stored, keys that look like paths) share one project, one file each, and one real `barca
get`, whose history gives each step's error.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from barca.store.packs import file_of
from conftest import Result, barca, barca_here, result_bytes
from fuzz_corpus import (CONFINED, CONFINED_KEYS, VALUE_CASES, Case, ValueCase,
                         barca_frames, hand_written_cases, make_cases, mutation_cases,
                         problems, valid_pipeline)

CASES = [*hand_written_cases(), *mutation_cases()]


def _answer(directory: Path, case: Case) -> Result:
    return barca(case.write(directory), *case.args, env=case.env)


@pytest.fixture(scope="module")
def answers(request: pytest.FixtureRequest, tmp_path_factory) -> dict[str, Result]:
    """The answer to every selected case (all refusals: nothing runs), in this process."""
    test = test_a_malformed_command_is_refused_naming_its_cause.__name__
    selected = [item.callspec.params["command"] for item in request.session.items
                if getattr(item, "originalname", None) == test]
    base = tmp_path_factory.mktemp("fuzz")
    return {case.id: barca_here(case.write(base / f"c{i:03d}"), *case.args, env=case.env)
            for i, case in enumerate(selected)}


@pytest.mark.parametrize("command", CASES, ids=[case.id for case in CASES])
def test_a_malformed_command_is_refused_naming_its_cause(command: Case, answers):
    result = answers[command.id]
    found = problems(command, result.code, result.stdout, result.stderr)
    assert not found, f"{command.id}: {found}\nstdout:\n{result.stdout[-2000:]}\n" \
                      f"stderr:\n{result.stderr[-3000:]}"


def test_the_pipeline_the_mutations_break_is_valid(project: Path):
    (project / "p.py").write_text(valid_pipeline())
    assert barca(project, "list", "p.py").expect(0).json["total"] == 5
    dry = barca(project, "get", "p.py", "--dry-run").expect(0).json
    assert dry["summary"]["unknown"] == 0


# -- values only a run can see ----------------------------------------------------------------

VALUES = [*VALUE_CASES, *CONFINED]


def _file(case: ValueCase) -> str:
    return case.file or f"v{VALUES.index(case):03d}.py"


@pytest.fixture(scope="module")
def value_run(tmp_path_factory) -> tuple[Path, Result, dict[str, dict], dict[str, list[dict]]]:
    """One `barca get` over every value case; (root, its result, get's steps by id, the
    recorded steps by node id)."""
    root = tmp_path_factory.mktemp("values")
    (root / "barca.toml").write_text("")
    for case in VALUES:
        (root / _file(case)).parent.mkdir(exist_ok=True)
        (root / _file(case)).write_text(case.pipeline())
    run = barca(root, "get", timeout=300)
    history = barca(root, "history", run.json["run_id"]).expect(0).json
    recorded: dict[str, list[dict]] = {}
    for step in history["steps"]:
        recorded.setdefault(step["node_id"], []).append(step)
    return root, run, {s["id"]: s for s in run.json["steps"]}, recorded


def test_the_value_run_fails_without_a_barca_frame(value_run):
    _, run, _, _ = value_run
    run.expect(1)
    assert not barca_frames(run.stdout + run.stderr), run.stderr[-3000:]


@pytest.mark.parametrize("case", VALUE_CASES, ids=[case.id for case in VALUE_CASES])
def test_a_malformed_value_fails_its_step_naming_the_cause(case: ValueCase, value_run):
    _, _, steps, recorded = value_run
    file = _file(case)
    [step] = recorded[f"{file}:out"]
    assert step["status"] == "failed", step
    missing = [word for word in case.cause if word not in step["error"]]
    assert not missing, f"{case.id}: the error does not name {missing}: {step['error']}"
    assert not barca_frames(step["error_traceback"] or ""), step["error_traceback"]
    if case.kind.endswith("source"):
        assert steps[f"{file}:reader"]["status"] == "skipped"


@pytest.mark.parametrize("case", CONFINED, ids=[case.id for case in CONFINED])
def test_a_key_that_looks_like_a_path_stays_inside_the_artifacts(case: ValueCase, value_run):
    root, _, steps, recorded = value_run
    file = _file(case)
    assert steps[f"{file}:reader"]["status"] == "ran"
    artifacts = (root / ".barca" / "artifacts").resolve()
    [step] = recorded[f"{file}:reader"]
    path = (root / file_of(step["artifact_path"])).resolve()  # a small result's pack
    assert path.is_relative_to(artifacts) and path.parent.parent == artifacts
    assert json.loads(result_bytes(root, step["artifact_path"])) == \
        CONFINED_KEYS[case.id.split("/", 1)[1]]


def test_nothing_was_written_outside_the_project(value_run):
    root, _, _, _ = value_run
    written = {p.name for p in root.iterdir()}
    assert written == {".barca", "barca.toml", *(_file(c).split("/")[0] for c in VALUES)} | (
        {"__pycache__"} & written)


# -- the soak's generator ---------------------------------------------------------------------

def test_make_cases_is_reproducible_and_each_case_distinct():
    first = make_cases(300, seed=7)
    assert [c.id for c in first] == [c.id for c in make_cases(300, seed=7)]
    assert len({c.id for c in first}) == 300
    assert [c.id for c in first] != [c.id for c in make_cases(300, seed=8)]


def test_a_sample_of_generated_cases_is_answered_right(tmp_path: Path):
    sample = make_cases(12, seed=13)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda ic: _answer(tmp_path / f"g{ic[0]}", ic[1]),
                                enumerate(sample)))
    wrong = {case.id: problems(case, r.code, r.stdout, r.stderr)
             for case, r in zip(sample, results)}
    assert not any(wrong.values()), {k: v for k, v in wrong.items() if v}
