"""`barca logs`: what steps printed, in order, without barca's own lines; step selection.

The run is made once for the module; `barca logs` runs in this process (`barca_here`) but for
the first test, which runs the real command."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import barca, barca_here, write

PIPELINE = """
    import logging
    import sys
    from barca import asset, partitions

    @asset()
    def orders() -> list:
        print("reading orders")
        print("slow warehouse", file=sys.stderr)
        print("2 rows")
        return [1, 2]

    @asset(partitions={"retailer": partitions(["r1", "r2", "r3"])}, inputs={"orders": orders})
    def scored(retailer: str, orders: list) -> dict:
        print("scoring", retailer)
        logging.getLogger("scored").warning("checked %s", retailer)
        return {"retailer": retailer}

    @asset()
    def silent() -> int:
        return 1
"""


@pytest.fixture(scope="module")
def computed(tmp_path_factory) -> tuple[Path, str]:
    """A run of the whole pipeline, made once for the module: (its project, its run id)."""
    root = write(tmp_path_factory.mktemp("logs"), {"barca.toml": "", "pipeline.py": PIPELINE})
    body = barca(root, "get", "pipeline.py", env={"BARCA_POOL_SIZE": "1"}).expect(0).json
    return root, body["run_id"]


@pytest.fixture
def run_id(computed: tuple[Path, str], project: Path) -> str:
    """That run's id, its project copied to `project` (a test may run more there)."""
    shutil.copytree(computed[0], project, dirs_exist_ok=True)
    return computed[1]


def test_logs_print_each_steps_lines_in_order_without_progress_lines(project: Path,
                                                                      run_id: str) -> None:
    out = barca(project, "logs", run_id).expect(0).stdout.splitlines()
    assert out[:3] == ["[pipeline.py:orders] reading orders",
                       "[pipeline.py:orders] slow warehouse",
                       "[pipeline.py:orders] 2 rows"]
    assert "[pipeline.py:scored[retailer=r1]] scoring r1" in out
    assert "[pipeline.py:scored[retailer=r3]] checked r3" in out
    assert len(out) == 9
    assert not any("[barca]" in line for line in out)
    assert out.index("[pipeline.py:scored[retailer=r1]] scoring r1") > out.index(
        "[pipeline.py:orders] 2 rows")


def test_step_accepts_a_name_an_id_or_one_key(project: Path, run_id: str) -> None:
    def lines(step: str) -> list[str]:
        return barca_here(project, "logs", run_id, "--step", step).expect(0).stdout.splitlines()

    every_key = lines("scored")
    assert len(every_key) == 6 and all(line.startswith("[pipeline.py:scored[") for line in
                                       every_key)
    assert lines("pipeline.py:scored") == every_key
    assert lines("scored[retailer=r2]") == ["scoring r2", "checked r2"]
    assert lines("scored[r2]") == ["scoring r2", "checked r2"]
    assert lines("pipeline.py:scored[retailer=r2]") == ["scoring r2", "checked r2"]
    assert lines("orders") == ["reading orders", "slow warehouse", "2 rows"]
    assert lines("silent") == []


def test_a_step_that_wrote_nothing_is_said_to_have_written_nothing(project: Path,
                                                                    run_id: str) -> None:
    """An empty answer alone reads as a broken command or a step that never ran."""
    silent = barca(project, "logs", run_id, "--step", "silent").expect(0)
    assert silent.stdout == ""
    assert silent.stderr.splitlines()[-1] == (f"barca: step 'pipeline.py:silent' ran in run "
                                              f"{run_id} and wrote nothing to stdout or stderr")
    keys = barca_here(project, "logs", run_id, "--step", "scored", "--stream", "stdout",
                      "--json").expect(0)
    assert len(keys.json) == 3 and "wrote nothing" not in keys.stderr
    quiet = barca_here(project, "logs", run_id, "--step", "silent", "--stream", "stderr",
                       "--json").expect(0)
    assert quiet.json == [] and quiet.stderr.splitlines()[-1].endswith(
        "and wrote nothing to stderr")


def test_stream_keeps_one_stream(project: Path, run_id: str) -> None:
    err = barca_here(project, "logs", run_id, "--step", "orders", "--stream", "stderr").expect(0)
    assert err.stdout.splitlines() == ["slow warehouse"]
    out = barca_here(project, "logs", run_id, "--step", "orders", "--stream", "stdout").expect(0)
    assert out.stdout.splitlines() == ["reading orders", "2 rows"]


def test_pretty_groups_lines_by_step(project: Path, run_id: str) -> None:
    out = barca_here(project, "logs", run_id, "--pretty").expect(0).stdout
    blocks = out.split("\n\n")
    assert blocks[0].splitlines() == ["── pipeline.py:orders (3 lines)", "  reading orders",
                                      "  [stderr] slow warehouse", "  2 rows"]
    assert len(blocks) == 4
    assert blocks[2].splitlines()[0] == "── pipeline.py:scored[retailer=r2] (2 lines)"


def test_json_gives_one_object_per_line(project: Path, run_id: str) -> None:
    body = barca_here(project, "logs", run_id, "--json", "--step", "scored[retailer=r1]").expect(0)
    lines = body.json
    assert [line["line"] for line in lines] == ["scoring r1", "checked r1"]
    first = lines[0]
    assert first["step_id"] == "pipeline.py:scored[retailer=r1]"
    assert first["node_id"] == "pipeline.py:scored" and first["partition_key"] == "retailer=r1"
    assert first["stream"] == "stdout" and lines[1]["stream"] == "stderr"
    assert first["ts"].endswith("Z") and "T" in first["ts"]


def test_without_run_id_the_newest_run_is_shown(project: Path, run_id: str) -> None:
    newer = barca(project, "get", "orders", "pipeline.py", "--refresh", "orders").expect(0)
    result = barca_here(project, "logs").expect(0)
    assert result.stdout.splitlines() == ["[pipeline.py:orders] reading orders",
                                          "[pipeline.py:orders] slow warehouse",
                                          "[pipeline.py:orders] 2 rows"]
    assert f"most recent run: {newer.json['run_id']}" in result.stderr


def test_unknown_step_is_exit_2_listing_the_runs_steps(project: Path, run_id: str) -> None:
    bad = barca_here(project, "logs", run_id, "--step", "cleaned").expect(2)
    assert bad.envelope["error"] == f"no step 'cleaned' in run {run_id}"
    assert "pipeline.py:scored (3 keys)" in bad.envelope["remediation"]
    assert barca_here(project, "logs", run_id, "--step", "scored[retailer=r9]").code == 2


def test_ambiguous_step_name_is_exit_2(project: Path) -> None:
    write(project, {"a.py": "from barca import asset\n\n@asset()\ndef total() -> int:\n"
                            "    print('a')\n    return 1\n",
                    "b.py": "from barca import asset\n\n@asset()\ndef total() -> int:\n"
                            "    print('b')\n    return 2\n"})
    run_id = barca(project, "get", "a.py", "b.py").expect(0).json["run_id"]
    bad = barca_here(project, "logs", run_id, "--step", "total").expect(2)
    assert "ambiguous" in bad.envelope["error"] and "a.py:total" in bad.envelope["error"]
    assert barca_here(project, "logs", run_id, "--step", "b.py:total").expect(0).stdout == "b\n"


def test_unknown_run_and_empty_history_are_exit_2(project: Path, tmp_path_factory) -> None:
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "silent", "pipeline.py").expect(0)
    bad = barca_here(project, "logs", "0123456789ab").expect(2)
    assert "unknown run id" in bad.envelope["error"]
    empty = tmp_path_factory.mktemp("empty")
    none = barca_here(empty, "logs").expect(2)
    assert "no run has been recorded" in none.envelope["error"]
    assert not (empty / ".barca").exists()


def test_json_and_pretty_together_are_a_usage_error(project: Path, run_id: str) -> None:
    assert barca_here(project, "logs", run_id, "--json", "--pretty").expect(2).envelope[
        "kind"] == "usage"


def test_what_a_key_writes_to_its_file_descriptors_is_its_own(project: Path) -> None:
    """A worker runs a lease's keys one after another: bytes a step writes to fd 1 itself (a C
    library, a child process) go to that key's log, never to the next key's."""
    write(project, {"pipeline.py": (
        "import os\nfrom barca import asset, partitions\n\n"
        "@asset(partitions={'k': partitions([f'k{i}' for i in range(8)])})\n"
        "def raw(k: str) -> str:\n"
        "    print('print', k)\n"
        "    os.write(1, f'raw {k}\\n'.encode())\n"
        "    os.write(2, f'half {k}'.encode())\n"
        "    return k\n")})
    run_id = barca(project, "get", "pipeline.py", env={"BARCA_POOL_SIZE": "1"}
                   ).expect(0).json["run_id"]
    for i in range(8):
        lines = barca_here(project, "logs", run_id, "--step", f"raw[k=k{i}]").expect(0)
        assert sorted(lines.stdout.splitlines()) == [f"half k{i}", f"print k{i}", f"raw k{i}"]
