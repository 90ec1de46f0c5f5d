"""The ledger's routes (engine.ledger_server): `POST /ledger/lookup`, which results the team's
record holds, and `POST /ledger/runs`, a client's finished run recorded once the store holds
what it names. Both pass the guard's checks for a change (token, Origin, JSON body) like every
POST; their bodies may be larger than a run request's (guard.LEDGER_BODY_BYTES: a partitioned
node's columns). A post is refused by a read-only (403) or draining (503) server.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca.engine.ledger_server import Ledger
from barca.server import blocking
from barca.server.http import ApiError, Served, json, only_params


def ledger_routes(s: Served) -> list[Route]:
    ledgers: dict[str, Ledger] = {}

    def ledger() -> Ledger:
        project = s.pipeline.project
        key = str(project.db_path)
        if key not in ledgers:
            ledgers[key] = Ledger(project)
        return ledgers[key]

    async def lookup(request: Request) -> Response:
        only_params(request.query_params)
        return json(await blocking.read(ledger().lookup, await _body(request)))

    async def runs(request: Request) -> Response:
        s.writable()
        only_params(request.query_params)
        if s.runs is not None and (s.runs.draining or s.runs.closing):
            raise ApiError(503, "the server is shutting down: it records no run now",
                           "post again once it is back (barca does so by itself)", kind="busy")
        return json(await blocking.read(ledger().record, await _body(request)), 201)

    return [Route("/ledger/lookup", lookup, methods=["POST"]),
            Route("/ledger/runs", runs, methods=["POST"])]


async def _body(request: Request) -> object:
    try:
        return orjson.loads(await request.body() or b"null")
    except orjson.JSONDecodeError:
        raise ApiError(400, "the body is not JSON", "send a JSON object") from None
