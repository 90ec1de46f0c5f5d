"""A run's captured lines as `barca logs` and `GET /runs/{id}/logs` give them: which recorded
steps a `--step` (or `?step=`) names, and each line as JSON."""

from __future__ import annotations

from typing import Any

from barca.errors import UsageError
from barca.store import history as store
from barca.store.db import Connection
from barca.views.times import iso_time


def chosen_steps(conn: Connection, run_id: str, step: str | None) -> list[str] | None:
    """The step ids whose lines a `--step` value asks for (a batched key: its call's, under
    which the call's output is logged once); None for every step. UsageError for a step the
    run did not record, naming the ones it did."""
    if step is None:
        return None
    chosen = match_steps(store.step_ids(conn, run_id), step)
    if not chosen:
        raise unknown_step(conn, run_id, step)
    return store.call_step_ids(conn, run_id, chosen)


def match_steps(step_ids: list[str], text: str) -> list[str]:
    """The recorded steps a `--step` value names.

    `scored`, `pipeline.py:scored` -> every key of that node; `scored[retailer=r7]`,
    `scored[r7]` or `pipeline.py:scored[retailer=r7]` -> that one key. A bare name shared by
    nodes of several files is ambiguous (exit 2).
    """
    base, bracket, rest = text.partition("[")
    key = rest[:-1] if bracket and rest.endswith("]") else None
    found = []
    for step_id in step_ids:
        node, _, label = step_id.partition("[")
        label = label[:-1]
        if base != node and base != node.rpartition(":")[2]:
            continue
        if key is not None and key != label and label.partition("=")[2] != key:
            continue
        found.append(step_id)
    nodes = sorted({s.partition("[")[0] for s in found})
    if len(nodes) > 1:
        raise UsageError(f"step '{text}' is ambiguous: {', '.join(nodes)}",
                         f"name it by its node id, e.g. --step '{nodes[0]}'")
    return found


def unknown_step(conn: Connection, run_id: str, text: str) -> UsageError:
    known = store.step_ids(conn, run_id)
    if not known:
        return UsageError(f"no step '{text}' in run {run_id}: this run executed no step",
                          "steps served from cache print nothing; pick a run that executed "
                          "it with `barca history`")
    keys: dict[str, int] = {}
    for step_id in known:
        node = step_id.partition("[")[0]
        keys[node] = keys.get(node, 0) + (step_id != node)
    names = [f"{n} ({k} key{'s' if k != 1 else ''})" if k else n for n, k in keys.items()]
    listed = ", ".join(names[:10]) + (f", +{len(names) - 10} more" if len(names) > 10 else "")
    return UsageError(f"no step '{text}' in run {run_id}",
                      f"steps of this run: {listed}")


def line_json(line: store.LogRow) -> dict[str, Any]:
    node, bracket, label = line.step_id.partition("[")
    return {"step_id": line.step_id, "node_id": node,
            "partition_key": label[:-1] if bracket else None, "stream": line.stream,
            "ts": iso_time(line.ts), "line": line.line}



def recorded_lines(conn: Connection | None, run_id: str, step: str | None,
                   stream: str | None) -> list[dict[str, Any]] | None:
    """The lines a recorded run's steps wrote (of `step`, of `stream`), as `barca logs --json`
    gives them; None when no run has this id."""
    if conn is None or store.get_run(conn, run_id) is None:
        return None
    return [line_json(line) for line in
            store.run_logs(conn, run_id, chosen_steps(conn, run_id, step), stream)]
