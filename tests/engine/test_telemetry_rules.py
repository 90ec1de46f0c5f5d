"""`BARCA_TELEMETRY=otel` through the driver in this process (the in-process executor runs each
step with the real step runner), its spans taken by the OpenTelemetry SDK's in-memory
exporter: a program that set its own SDK tracer provider (as this test does, once per
process) gets barca's spans there, with a step's context carried in its spec as it is to a
worker process. The end-to-end view of the same tree, across processes, is
tests/e2e/test_telemetry.py.
"""

from __future__ import annotations

import pytest

from engine_runs import engine  # noqa: F401 - the fixture

pytest.importorskip("opentelemetry.sdk", reason="the otel extra (in dev) is not installed")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

PIPELINE = """
from barca import asset, partitions

@asset(partitions={"day": partitions(["d1", "d2", "d3"])}, batch="all")
def loaded(day: list[str]) -> dict:
    return {d: len(d) for d in day}

@asset(partitions={"day": partitions(["d1", "d2", "d3"])}, inputs={"loaded": loaded})
def checked(day: str, loaded: int) -> int:
    return loaded + 1
"""


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    """The process's tracer provider, set once (OpenTelemetry allows one per process)."""
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        current = TracerProvider()
        trace.set_tracer_provider(current)
    memory = InMemorySpanExporter()
    current.add_span_processor(SimpleSpanProcessor(memory))
    return memory


def test_the_span_tree_reaches_a_provider_the_program_set(engine, exporter):  # noqa: F811
    exporter.clear()
    (engine.root / "pipeline.py").write_text(PIPELINE)
    ran = engine.get(None, "pipeline.py", environ={"BARCA_TELEMETRY": "otel"}).expect(0)
    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "barca.run"]
    assert root.attributes["barca.run_id"] == ran.result.run_id
    assert root.attributes["barca.steps.executed"] == 6
    steps = {s.attributes["barca.node_id"]: s for s in spans if s.name == "barca.step"}
    assert set(steps) == {"pipeline.py:loaded", "pipeline.py:checked"}
    assert all(s.parent.span_id == root.context.span_id for s in steps.values())

    (call,) = [s for s in spans if s.name == "barca.execute"
               and s.attributes["barca.node_id"] == "pipeline.py:loaded"]
    assert call.attributes["barca.batch.keys"] == 3
    assert call.parent.span_id == steps["pipeline.py:loaded"].context.span_id
    checks = [s for s in spans if s.name == "barca.execute"
              and s.attributes["barca.node_id"] == "pipeline.py:checked"]
    keys = [s for s in spans if s.name == "barca.partition"
            and s.attributes["barca.node_id"] == "pipeline.py:checked"]
    assert len(checks) == len(keys) == 3
    assert {s.attributes["barca.run_hash"] for s in checks} == \
        {s.attributes["barca.run_hash"] for s in keys}
    assert {s.context.trace_id for s in spans} == {root.context.trace_id}

    exporter.clear()  # a cached run: node spans, hits, no key and no worker span
    engine.get(None, "pipeline.py", environ={"BARCA_TELEMETRY": "otel"}).expect(0)
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == ["barca.run", "barca.step", "barca.step"]
    assert all(s.attributes["barca.cached"] for s in spans if s.name == "barca.step")


def test_telemetry_off_makes_no_span(engine, exporter):  # noqa: F811
    exporter.clear()
    (engine.root / "pipeline.py").write_text(PIPELINE)
    engine.get(None, "pipeline.py", environ={"BARCA_TELEMETRY": None}).expect(0)
    assert exporter.get_finished_spans() == ()
