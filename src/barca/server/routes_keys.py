"""The routes of one key of a node, read by the web UI's key page: its attempts (each with
its run, error and traceback) and a preview of its stored value (`views.key_pages`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca.server import blocking
from barca.server.http import ApiError, Served, int_param, json
from barca.views.key_pages import attempts_json, value_json


def key_routes(s: Served) -> list[Route]:
    def node_and_key(request: Request):
        node = s.pipeline.graph.nodes[s.node_id(request.path_params["name"])]
        label = request.query_params.get("key", "")
        if node.dimensions and not label:
            raise ApiError(400, f"'{node.node_id}' is partitioned: name one of its keys",
                           "pass ?key=DIM=VALUE (a key's label, as /partitions lists them)")
        return node, label

    async def attempts(request: Request) -> Response:
        """A key's attempts, newest first (`?limit=`, `?run=` one run's alone)."""
        node, label = node_and_key(request)
        limit = int_param(request.query_params, "limit", 20, 1, 200)
        run_id = request.query_params.get("run") or None
        return json(await blocking.read(s.read, attempts_json, node, label, limit, run_id))

    async def value(request: Request) -> Response:
        """A preview of a key's newest stored value."""
        node, label = node_and_key(request)
        return json(await blocking.read(s.read, value_json, s.pipeline.project.root, node,
                                        label))

    return [Route("/assets/{name:path}/attempts", attempts),
            Route("/assets/{name:path}/value", value)]
