"""The routes that describe the served project and its stored results, answered in the
server process (no child, no pipeline import): `/plan` (`barca plan`), `/groups`,
`/project` (what is served, and from which commit), `/materializations` (the history's rows,
paged) and `/sql/views` (the files each `barca sql` view reads, for a client that queries
them itself: the server never runs SQL)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca.engine.ledger_server import API_VERSION
from barca.server import blocking
from barca.server.http import ApiError, Served, int_param, json, only_params
from barca.views.node_list import group_list
from barca.views.plan import plan_of
from barca.views.project_reads import materializations_json, project_json, sql_views_json

MAX_ROWS = 10_000  # a page of /materializations


def project_routes(s: Served) -> list[Route]:
    async def plan(request: Request) -> Response:
        """`barca plan --json` of the served files: phases, capacity, weights."""
        only_params(request.query_params)
        return json(await blocking.read(plan_of, s.pipeline))

    async def groups(request: Request) -> Response:
        """The served files' `group(...)`s, read from their source."""
        only_params(request.query_params)
        return json(await blocking.read(group_list, s.pipeline))

    async def project(request: Request) -> Response:
        only_params(request.query_params)
        return json(await blocking.read(project_json, s.pipeline, API_VERSION, s.loaded_at))

    async def materializations(request: Request) -> Response:
        """Every recorded execution, newest first, `?limit=` (1000, at most 10,000) from
        `?offset=`."""
        query = request.query_params
        only_params(query, "limit", "offset")
        limit = int_param(query, "limit", 1000, 1, MAX_ROWS)
        offset = int_param(query, "offset", 0, 0, 10**12)
        return json(await blocking.read(s.read, materializations_json, limit, offset))

    async def sql_views(request: Request) -> Response:
        """The `barca sql` views of the served nodes (`?files=a.py,b.py`: of these files)."""
        query = request.query_params
        only_params(query, "files")
        pipeline = s.pipeline
        files = None
        if query.get("files"):
            files = query["files"].split(",")
            unknown = [f for f in files if f not in pipeline.files]
            if unknown:
                raise ApiError(404, f"'{unknown[0][:200]}' is not a file this server serves",
                               f"files served: {', '.join(pipeline.files) or 'none'}")
        stale = {}
        if pipeline.files:
            stale = {n["id"]: n["cache"]["state"] != "cached"
                     for n in await blocking.command(s.state.nodes_now)}
        return json(await blocking.read(s.read, sql_views_json, pipeline, files, stale))

    return [Route("/plan", plan), Route("/groups", groups), Route("/project", project),
            Route("/materializations", materializations), Route("/sql/views", sql_views)]
