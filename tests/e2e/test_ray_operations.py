"""Running a pipeline on a real multi-node Ray cluster of this machine (the `ray_cluster`
fixture: a head and a worker node, each its own raylet), as an operator sees it: a traced run's
worker spans from every node join the run's trace, and a worker lost mid-step leaves a span
ending with its loss; `timeout_seconds=` ends a step that never ends with the local pool's
error (its Ray worker killed); `barca serve` runs on Ray when barca.toml says so, and
`DELETE /runs/{id}` cancels the Ray task running its step.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, db_rows, gone, poll, write
from trace_intakes import otlp_intake

pytestmark = pytest.mark.ray
pytest.importorskip("ray")

KEYS = [f"k{i:02d}" for i in range(12)]

TRACED = f"""
    import os
    from pathlib import Path

    from barca import asset, collect, partitions

    @asset(partitions={{"k": partitions({KEYS!r})}})
    def scored(k: str) -> int:
        marker = Path("lost-once")
        if k == "k03" and not marker.exists():  # its worker dies mid-step, once
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), 9)
        return len(k)

    @asset(inputs={{"all": collect(scored)}})
    def total(all: list) -> int:
        return sum(all)
"""


def test_worker_spans_from_every_node_join_the_runs_trace_and_a_lost_one_ends_with_its_error(
        tmp_path: Path, ray_cluster) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra (in dev) is not installed")
    write(tmp_path, {"pipeline.py": TRACED, "barca.toml": ""})
    intake = otlp_intake()
    try:
        env = {**ray_cluster.env, "BARCA_EXECUTOR": "ray", "BARCA_TELEMETRY": "otel",
               "OTEL_EXPORTER_OTLP_ENDPOINT": intake.url}
        run = barca(tmp_path, "get", "total", "pipeline.py", env=env, timeout=180).expect(0)
        assert run.json["final_output"] == 3 * len(KEYS)
        assert "warning" not in run.stderr, run.stderr
        (root,) = [s for s in intake.named("barca.run")
                   if s.attributes.get("barca.run_id") == run.json["run_id"]]
        spans = [s for s in intake.spans if s.trace_id == root.trace_id]
    finally:
        intake.close()
    steps = {s.span_id: s for s in spans if s.name == "barca.step" and
             s.parent_id == root.span_id}
    executed = [s for s in spans if s.name == "barca.execute"]
    # every worker span is under its node's span, under the run's
    assert executed and all(s.parent_id in steps for s in executed)
    assert all(steps[s.parent_id].attributes["barca.node_id"] == s.attributes["barca.node_id"]
               for s in executed)
    ran = [s for s in executed if s.attributes["barca.outcome"] == "ran"]
    assert sorted(s.attributes["barca.step_id"] for s in ran) == sorted(
        [f"pipeline.py:scored[k={k}]" for k in KEYS] + ["pipeline.py:total"])
    nodes = {n.node_id for n in [ray_cluster.cluster.head_node,
                                 *ray_cluster.cluster.worker_nodes]}
    assert {s.attributes["barca.ray.node_id"] for s in ran} == nodes
    # the attempt whose worker died: its span, made where the loss was seen, says so
    (lost,) = [s for s in executed if s.attributes["barca.outcome"] == "lost"]
    assert lost.attributes["barca.step_id"] == "pipeline.py:scored[k=k03]"
    assert lost.error and lost.attributes["error.type"] == "WorkerLost"
    assert "lost" in lost.attributes["error.message"]


SLOW = """
    import os
    import time
    from pathlib import Path

    from barca import asset, partitions

    @asset(partitions={"k": partitions([f"k{i:02d}" for i in range(40)])}, timeout_seconds=3)
    def slow(k: str) -> str:
        print(f"working on {k}")
        if k == "k07":
            Path("pid").write_text(str(os.getpid()))
            time.sleep(3600)
        return k
"""


def test_a_step_past_its_timeout_fails_as_in_a_local_run_and_its_ray_worker_ends(
        tmp_path: Path, ray_cluster) -> None:
    results = {}
    for executor in ("local", "ray"):
        root = write(tmp_path / executor, {"pipeline.py": SLOW, "barca.toml": ""})
        failed = barca(root, "get", "slow", "pipeline.py", "--executor", executor,
                       env=ray_cluster.env, timeout=120).expect(1)
        results[executor] = (failed.envelope, db_rows(
            root, "select key, status, error_type, error_message from materializations "
                  "order by key"))
        assert failed.envelope["node"] == "pipeline.py:slow[k=k07]"
        pid = int((root / "pid").read_text())
        poll(lambda: gone(pid), f"the process {pid} running the step to end")
        logs = barca(root, "logs").expect(0).stdout
        assert "working on k06" in logs and "working on k39" in logs
    assert results["ray"] == results["local"]
    # a key of a lease of several (40 keys on 2 CPUs): its lease's others are not blamed
    envelope, rows = results["ray"]
    assert [row for row in rows if row[1] != "success"] == [
        ("k07", "failed", "TimeoutError", "step pipeline.py:slow[k=k07] timed out after 3s")]
    assert len(rows) == 40


HELD = """
    import os
    import time
    from pathlib import Path

    from barca import asset

    @asset
    def held() -> int:
        Path("pid").write_text(str(os.getpid()))
        time.sleep(3600)
        return 1
"""


@pytest.mark.parametrize("warm, toml, env", [
    ("0", '[executor]\nkind = "ray"\n', {}), ("30", "", {"BARCA_EXECUTOR": "ray"})],
    ids=["barca.toml-fresh", "BARCA_EXECUTOR-warm-pool"])
def test_barca_serve_runs_on_ray_and_delete_cancels_the_ray_task(
        tmp_path: Path, ray_cluster, serve, warm: str, toml: str, env: dict) -> None:
    root = write(tmp_path, {"pipeline.py": HELD, "barca.toml": toml})
    server = serve(root, "pipeline.py", env={**ray_cluster.env, **env}, warm=warm)
    run_id = server.start_run({"targets": ["held"]})
    pid = int(poll(lambda: (root / "pid").exists() and (root / "pid").read_text(),
                   "the step to start", timeout=120))
    command = Path(f"/proc/{pid}/cmdline").read_bytes()
    assert b"ray::" in command, command  # a Ray worker runs it, not a local one

    cancelled = server.delete(f"/runs/{run_id}")
    assert cancelled.status_code == 200, cancelled.text
    detail = server.wait_ended(run_id, timeout=60)
    assert detail["run"]["status"] == "cancelled", detail["run"]
    poll(lambda: gone(pid), f"the Ray worker {pid} running the step to end")
    assert db_rows(root, "select status from runs where run_id = ?", (run_id,)) == [
        ("cancelled",)]
