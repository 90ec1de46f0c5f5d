"""Handing a run's claimed steps to the executor: grouped into batch calls where a node is
batched (engine.batch_calls), made into specs only as the executor draws them (so 200,000 are
never all in memory), with the stored columns of the key sources about to run read first
(their steps compare with them) and loaded while they run."""

from __future__ import annotations

from typing import Any, Iterator

from barca.engine.batch_calls import BatchCalls
from barca.engine.concurrent_runs import Steps
from barca.engine.events import Reporter
from barca.engine.executor import Executor
from barca.engine.planning import Planning
from barca.engine.protocol import CallSpec, StepSpec
from barca.engine.run_recorder import RunRecorder
from barca.engine.step_specs import NodeSteps, call_spec
from barca.graph import Graph
from barca.telemetry import NO_TRACE


class StepSubmission:
    """`store` and `scratch`: the addresses steps read and write (scratch: a dry run's). When
    the run is traced (the recorder's trace, barca.telemetry), each spec carries its node's
    trace context to the worker."""

    def __init__(self, graph: Graph, planning: Planning, batches: BatchCalls,
                 recorder: RunRecorder, reporter: Reporter, store: str, scratch: str) -> None:
        self.graph, self.planning, self.batches = graph, planning, batches
        self.recorder, self.reporter, self.store, self.scratch = recorder, reporter, store, scratch

    def submit(self, executor: Executor, steps: Steps, first: bool = False) -> None:
        """`first`: the steps go ahead of those queued (keys a streaming reader may run)."""
        sources = [n for n, _, keys in steps if keys and self.graph.is_key_source(n)]
        self.recorder.read_sources(sources)
        calls = {node_id: self.batches.group(node_id, plan, keys)
                 for node_id, plan, keys in steps if node_id in self.batches.settings}
        for node_id, _, keys in steps:
            if keys:
                self.reporter.steps_submitted(node_id, len(keys), len(calls[node_id])
                                              if node_id in calls else None)
        count = sum(len(calls[n]) if n in calls else len(keys) for n, _, keys in steps)
        specs = self._specs(steps, calls)
        if self.recorder.trace is not NO_TRACE:
            specs = self._traced(specs, self.recorder.trace)
        executor.submit(specs, count, first)
        self.recorder.load_sources(sources)  # while their steps run

    def _traced(self, specs: Iterator[StepSpec | CallSpec], trace: Any
                ) -> Iterator[StepSpec | CallSpec]:
        for spec in specs:
            yield spec._replace(trace=trace.node_carrier(spec.node_id))

    def _specs(self, steps: Steps, calls: dict) -> Iterator[StepSpec | CallSpec]:
        """The steps to run, made as the executor draws them: one per key, or one per call."""
        plans, artifact = self.planning.run.plans, self.planning.artifact
        for node_id, plan, keys in steps:
            if node_id not in calls:
                node = NodeSteps(self.graph, plans, node_id, plan, self.store, self.scratch,
                                 artifact, self.recorder.sources.known(node_id))
                if self.graph.nodes[node_id].kind != "sensor":
                    yield from map(node.spec, keys)
                    continue
                for i in keys:
                    yield node.spec(i, self.planning.last_observation(node_id, plan.keys[i]))
                continue
            for indices in calls[node_id]:
                yield call_spec(self.graph, plans, node_id, plan, indices,
                                self.batches.next_id(), self.store, artifact)
