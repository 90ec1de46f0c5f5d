"""The HTTP API: Starlette routes over the served pipeline, the runs and the metadata database,
and the web UI's files.

Every answer is JSON (errors as `{error, kind, remediation}`), every GET also answers HEAD,
an unknown path is a 404 and a wrong verb a 405 with `Allow`. In read-only mode every route
that would start or stop a run answers 403 and nothing writes the database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from barca.errors import BarcaError
from barca.server.http import (ApiError, Served, api_error, barca_error, crash, http_error,
                               merge_methods)
from barca.server.routes_capacity import capacity_routes
from barca.server.routes_inspect import inspect_routes
from barca.server.routes_keys import key_routes
from barca.server.routes_ledger import ledger_routes
from barca.server.routes_ops import ops_routes
from barca.server.routes_project import project_routes
from barca.server.routes_runs import run_routes
from barca.server.routes_schedule import schedule_routes
from barca.server.routes_views import view_routes

UI_DIR = Path(__file__).parent / "ui"


def build_app(served: Served, lifespan: Any = None) -> Starlette:
    # a key's routes first: /assets/{name:path} would take /assets/x/attempts
    routes = merge_methods(key_routes(served) + inspect_routes(served) + run_routes(served)
                           + view_routes(served) + ops_routes(served) + schedule_routes(served)
                           + project_routes(served) + ledger_routes(served)
                           + capacity_routes(served)) + [
        Route("/", _to_ui), Route("/ui", _to_ui),
        Mount("/ui", StaticFiles(directory=UI_DIR, html=True), name="ui")]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={
        HTTPException: http_error, ApiError: api_error, BarcaError: barca_error,
        Exception: crash})


async def _to_ui(request: Request) -> Response:
    """Relative, so that the UI works under any path prefix behind a proxy."""
    return Response(status_code=303, headers={"Location": "ui/"})
