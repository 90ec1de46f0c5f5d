"""Telemetry (`BARCA_TELEMETRY`, seed 002 and issue 29; `barca docs telemetry`) on the real CLI
with real worker processes, each exporting through its real library to a receiver of the
test's own on loopback (tests/e2e/trace_intakes.py): an OTLP/HTTP collector for `otel`, a
Datadog Agent trace intake (`DD_TRACE_AGENT_URL`) for `datadog`.

Covered: the span tree (`barca.run` -> `barca.step` per node -> `barca.partition` per executed
key, and the workers' `barca.execute`, one per step or per batch call with
`barca.batch.keys`) in one trace across processes; run hash, cache hit or miss, stale reason
and peak memory as attributes; a step's own OpenTelemetry span joining under its
`barca.execute`; an unknown integration, a missing library and an unreachable receiver are
warnings naming the fix; with telemetry off neither library is imported, by `barca --help`,
a run (coordinator and worker) or a cached `get`.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import barca, barca_env, edit, write
from trace_intakes import Intake, datadog_intake, otlp_intake

PIPELINE = """
    import json

    from barca import asset, collect, partitions_from, sensor

    @sensor
    def retailers() -> dict:
        return json.load(open("retailers.json"))

    @asset(partitions={"retailer": partitions_from(retailers)}, batch=2)
    def scored(retailer: list[str], retailers: dict) -> dict:
        return {r: retailers[r] * 2 for r in retailer}

    @asset(inputs={"all_scored": collect(scored)})
    def total(all_scored: list) -> int:
        from opentelemetry import trace  # a step's own span: it joins the run's trace

        with trace.get_tracer("pipeline").start_as_current_span("pipeline.sum"):
            return sum(all_scored)
"""

RETAILERS = {"r1": 1, "r2": 2, "r3": 3, "r4": 4, "r5": 5}


@pytest.fixture
def otlp():
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra (in dev) is not installed")
    intake = otlp_intake()
    yield intake
    intake.close()


@pytest.fixture
def agent():
    pytest.importorskip("ddtrace", reason="the datadog extra (in dev) is not installed")
    intake = datadog_intake()
    yield intake
    intake.close()


def project(root: Path, retailers: dict = RETAILERS) -> Path:
    write(root, {"pipeline.py": PIPELINE})
    (root / "retailers.json").write_text(json.dumps(retailers))
    return root


def otel_env(intake: Intake) -> dict[str, str]:
    return {"BARCA_TELEMETRY": "otel", "OTEL_EXPORTER_OTLP_ENDPOINT": intake.url}


def datadog_env(intake: Intake) -> dict[str, str]:
    # ddtrace's own product telemetry off: only traces go to the test's agent
    return {"BARCA_TELEMETRY": "datadog", "DD_TRACE_AGENT_URL": intake.url,
            "DD_INSTRUMENTATION_TELEMETRY_ENABLED": "false", "DD_REMOTE_CONFIGURATION_ENABLED":
            "false"}


def one_trace(intake: Intake, run_id: str):
    """The spans of run `run_id` (every span of its trace), found by its root."""
    root = next(s for s in intake.named("barca.run")
                if s.attributes.get("barca.run_id") == run_id)
    return root, [s for s in intake.spans if s.trace_id == root.trace_id]


def by_parent(spans, parent, name: str) -> list:
    return [s for s in spans if s.parent_id == parent.span_id and s.name == name]


def step_span(spans, root, node: str):
    (span,) = [s for s in by_parent(spans, root, "barca.step")
               if s.attributes["barca.node_id"] == f"pipeline.py:{node}"]
    return span


def test_otel_exports_one_trace_across_the_coordinator_and_its_workers(tmp_path, otlp):
    root_dir = project(tmp_path)
    first = barca(root_dir, "get", "pipeline.py", env=otel_env(otlp)).expect(0)
    assert "warning" not in first.stderr
    run_id = first.json["run_id"]
    root, spans = one_trace(otlp, run_id)
    assert root.parent_id == 0 and root.service == "barca" and not root.error
    assert root.attributes["barca.status"] == "success"
    assert root.attributes["barca.command"] == "get"
    assert {s.attributes["barca.node_id"] for s in by_parent(spans, root, "barca.step")} == {
        "pipeline.py:retailers", "pipeline.py:scored", "pipeline.py:total"}

    scored = step_span(spans, root, "scored")
    assert scored.attributes["barca.outcome"] == "ran"
    assert scored.attributes["barca.cached"] is False
    assert scored.attributes["barca.keys.executed"] == 5
    assert scored.attributes["barca.stale_reasons"] == "never_run:5"
    keys = by_parent(spans, scored, "barca.partition")
    assert sorted(k.attributes["barca.partition"] for k in keys) == [
        f"retailer=r{i}" for i in range(1, 6)]
    for key in keys:  # a cache miss, why, its run hash and its call's peak memory
        assert key.attributes["barca.cached"] is False
        assert key.attributes["barca.stale_reason"] == "never_run"
        assert len(key.attributes["barca.run_hash"]) == 32
        assert key.attributes["barca.max_rss_bytes"] > 0
    # the workers' spans: one per batch call of 2, 2 and 1 keys, under the node's span
    calls = by_parent(spans, scored, "barca.execute")
    assert sorted(c.attributes["barca.batch.keys"] for c in calls) == [1, 2, 2]
    assert all(c.attributes["barca.max_rss_bytes"] > 0 for c in calls)
    assert {c.attributes["barca.batch"] for c in calls} == \
        {k.attributes["barca.batch"] for k in keys}

    total = step_span(spans, root, "total")
    assert total.attributes["barca.run_hash"] == first.steps["total"]["run_hash"]
    (execute,) = by_parent(spans, total, "barca.execute")
    assert execute.attributes["barca.run_hash"] == first.steps["total"]["run_hash"]
    assert execute.attributes["barca.max_rss_bytes"] > 0
    # the step's own span, in the run's trace under its step's
    assert [s.name for s in spans if s.parent_id == execute.span_id] == ["pipeline.sum"]

    # one retailer's value changes: only its key runs, in one call of one key, and says why
    write_retailers = {**RETAILERS, "r3": 30}
    (root_dir / "retailers.json").write_text(json.dumps(write_retailers))
    second = barca(root_dir, "get", "pipeline.py", env=otel_env(otlp)).expect(0)
    root, spans = one_trace(otlp, second.json["run_id"])
    scored = step_span(spans, root, "scored")
    (key,) = by_parent(spans, scored, "barca.partition")
    assert key.attributes["barca.partition"] == "retailer=r3"
    assert key.attributes["barca.stale_reason"] == "changed"
    assert key.attributes["barca.stale_changed"] == "value pipeline.py:retailers"
    assert [c.attributes["barca.batch.keys"] for c in
            by_parent(spans, scored, "barca.execute")] == [1]
    assert scored.attributes["barca.keys.cached"] == 4

    # nothing changed: a cache hit, a span for the node and none for its keys
    third = barca(root_dir, "get", "pipeline.py", env=otel_env(otlp)).expect(0)
    root, spans = one_trace(otlp, third.json["run_id"])
    scored = step_span(spans, root, "scored")
    assert scored.attributes["barca.cached"] is True
    assert scored.attributes["barca.outcome"] == "cached"
    assert scored.attributes["barca.keys.cached"] == 5
    assert not [s for s in spans if s.parent_id == scored.span_id]


def test_a_failed_key_is_an_error_span_naming_its_error(tmp_path, otlp):
    project(tmp_path)
    edit(tmp_path / "pipeline.py", "return {r: retailers[r] * 2 for r in retailer}",
         'return {r: Failed("no rows") if r == "r2" else retailers[r] for r in retailer}')
    edit(tmp_path / "pipeline.py", "from barca import asset,", "from barca import Failed, asset,")
    run = barca(tmp_path, "get", "pipeline.py:scored", env=otel_env(otlp)).expect(1)
    root, spans = one_trace(otlp, run.json["run_id"])
    assert root.error and root.attributes["barca.status"] == "failed"
    scored = step_span(spans, root, "scored")
    assert scored.error and scored.attributes["barca.keys.failed"] == 1
    (failed,) = [k for k in by_parent(spans, scored, "barca.partition") if k.error]
    assert failed.attributes["barca.partition"] == "retailer=r2"
    assert failed.attributes["error.message"] == "no rows"


def test_datadog_sends_one_execute_span_per_batch_call_to_the_agent(tmp_path, agent):
    """Seed 002: with ddtrace in the worker, one `barca.execute` span per call with
    `barca.batch.keys`; the coordinator's spans stay per node and per key."""
    root_dir = project(tmp_path)
    run = barca(root_dir, "get", "pipeline.py:scored", env=datadog_env(agent)).expect(0)
    assert "warning" not in run.stderr
    root, spans = one_trace(agent, run.json["run_id"])
    assert root.parent_id == 0 and root.service == "barca"
    assert root.resource == "get pipeline.py:scored"
    assert root.attributes["barca.status"] == "success"
    scored = step_span(spans, root, "scored")
    assert scored.resource == "pipeline.py:scored"
    keys = by_parent(spans, scored, "barca.partition")
    assert sorted(k.attributes["barca.partition"] for k in keys) == [
        f"retailer=r{i}" for i in range(1, 6)]
    assert all(k.resource == "pipeline.py:scored" for k in keys)  # keys never in resources
    assert all(k.attributes["barca.max_rss_bytes"] > 0 for k in keys)
    calls = by_parent(spans, scored, "barca.execute")
    assert sorted(c.attributes["barca.batch.keys"] for c in calls) == [1, 2, 2]
    sensor = step_span(spans, root, "retailers")
    assert len(by_parent(spans, sensor, "barca.execute")) == 1
    # the run, its 2 nodes, 5 keys, 3 calls and the sensor's step: every span in one trace
    assert len({s.trace_id for s in spans}) == 1 and len(spans) == 1 + 2 + 5 + 3 + 1


def test_unknown_integration_and_missing_library_are_warnings_naming_the_fix(tmp_path):
    project(tmp_path)
    run = barca(tmp_path, "get", "pipeline.py:scored",
                env={"BARCA_TELEMETRY": "datadog-agent"}).expect(0)
    assert ("[barca] warning: telemetry 'datadog-agent' is not an integration barca knows; "
            "set BARCA_TELEMETRY to one of datadog, otel, or unset it") in run.stderr
    assert [w["kind"] for w in run.json["warnings"]] == ["telemetry"]

    # ddtrace not importable in this environment: a package of that name that fails
    shadow = tmp_path / "shadow"
    write(shadow, {"ddtrace/__init__.py": "raise ImportError('no ddtrace here')\n"})
    path = os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])
    run = barca(tmp_path, "get", "pipeline.py:scored", "--refresh", "scored",
                env={"BARCA_TELEMETRY": "datadog", "PYTHONPATH": path}).expect(0)
    assert ("[barca] warning: telemetry 'datadog' needs a library that is not installed; "
            "pip install 'barca[datadog]' in barca's environment (and its workers'), or "
            "unset BARCA_TELEMETRY") in run.stderr
    assert run.json["steps"][-1]["status"] == "ran"


def test_an_unreachable_collector_is_a_warning_and_the_run_goes_on(tmp_path, otlp):
    project(tmp_path)
    url = otlp.url
    otlp.close()  # nothing listens there now
    run = barca(tmp_path, "get", "pipeline.py:scored",
                env={"BARCA_TELEMETRY": "otel", "OTEL_EXPORTER_OTLP_ENDPOINT": url,
                     "OTEL_EXPORTER_OTLP_TIMEOUT": "1"}).expect(0)
    assert (f"[barca] warning: telemetry 'otel' did not receive run {run.json['run_id']}; "
            "check that its receiver is up and reachable") in run.stderr


TRACING = ("opentelemetry", "ddtrace")

# the real CLI's entry point in a fresh interpreter, then which tracing modules it loaded
COORDINATOR = ("import sys\nfrom barca.cli.main import main\ntry:\n    main(sys.argv[1:])\n"
               "except SystemExit:\n    pass\n"
               f"sys.stderr.write('\\nloaded: ' + repr(sorted({{m.split('.')[0] for m in "
               f"sys.modules}} & {set(TRACING)!r})))\n")


def test_telemetry_off_imports_no_tracing_library_anywhere(tmp_path):
    write(tmp_path, {"pipeline.py": """
        import sys

        from barca import asset

        @asset()
        def seen() -> list:
            return sorted({m.split(".")[0] for m in sys.modules} & {"opentelemetry", "ddtrace"})
    """})

    def loaded(*argv: str) -> tuple[list, subprocess.CompletedProcess]:
        out = subprocess.run([sys.executable, "-c", COORDINATOR, *argv], cwd=tmp_path,
                             env=barca_env({"BARCA_TELEMETRY": None,  # runs here, not in a
                                           "BARCA_WARM_SECONDS": "0"}),  # pool's child
                             capture_output=True,
                             text=True, timeout=60, check=False)
        return ast.literal_eval(out.stderr.rpartition("loaded: ")[2]), out

    for argv in (["--help"], ["get", "pipeline.py"], ["get", "pipeline.py"]):
        modules, out = loaded(*argv)
        assert modules == [], (argv, out.stderr)
    assert json.loads(out.stdout)["final_output"] == []  # the worker had none either
