"""Every node of a pipeline as `barca list` shows it (kind, freshness, inputs, declared env; a
scheduled node's cron and next fire, RFC 3339 UTC as JSON writes every moment): the same
entries for the CLI's table, its --json and a server's `/list`; and the groups that organise
them (`barca list --groups`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from barca.engine.driver import open_pipeline
from barca.schedules import next_fire
from barca.views.listing import listing, pick_fields
from barca.views.times import iso_time

LIST_FIELDS = ["id", "kind", "freshness", "schedule", "inputs", "env", "partitions",
               "next_fire"]


def node_list(paths: Sequence[str], count: int | None, fields: list[str] | None = None
              ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The first `count` nodes (None: all) of the pipeline `paths` name, in topological
    order, and `barca list --json` of them (`fields` of each)."""
    loaded = open_pipeline(list(paths))
    graph = loaded.graph
    now = datetime.now().astimezone()
    nodes = []
    for node_id in graph.order:
        d = graph.nodes[node_id]
        item: dict[str, Any] = {"id": node_id, "kind": d.kind, "freshness": d.freshness,
                                "inputs": list(graph.upstream[node_id]), "env": list(d.env),
                                "partitions": [dim.name for dim in d.dimensions]}
        if d.schedule:
            item["schedule"] = d.schedule
            item["next_fire"] = iso_time(next_fire(d.schedule, now).timestamp())
        nodes.append(item)
    shown = nodes[:count]
    return shown, listing({"root": str(loaded.project.root)}, "nodes",
                          pick_fields(shown, fields), len(nodes), "nodes")


def node_groups(paths: Sequence[str]) -> dict[str, Any]:
    """`barca list --groups --json`: every `group(...)` of the pipeline `paths` name, as the
    published barca lists them, `{groups: [{id, name, description, members, output}]}`."""
    # the nodes must load before their groups mean much
    return {"groups": group_list(open_pipeline(list(paths)))}


def group_list(loaded: Any) -> list[dict[str, Any]]:
    """The groups of a pipeline already open (a server's: `GET /groups`), read from its
    files' source."""
    from barca.discover.definitions import discover_groups

    return [{"id": g.id, "name": g.name, "description": g.description,
             "members": list(g.members), "output": g.output}
            for g in discover_groups(loaded.project.root, loaded.files)]
