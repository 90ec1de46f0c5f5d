"""The server's `--capacity` shared with its ledger's clients (`[server] shared_capacity`,
engine.local.leased_capacity is the other end): a client's run holds a lease, asks for units
before a worker takes a heavier step or batch call, and gives them back when the worker's
lease of steps is empty, in the same line as the server's own runs (server.capacity).

    POST   /capacity/leases                  {"run_id"?}          -> 201 {lease, total,
                                                                          lease_seconds}
    POST   /capacity/leases/{lease}/want     {"ask", "units", "wait_seconds"} -> {granted}
    POST   /capacity/leases/{lease}/give     {"units"}            -> {held}
    POST   /capacity/leases/{lease}/renew    {}                   -> {held}
    DELETE /capacity/leases/{lease}                               -> {released: true}

`ask` numbers the client's asks (one at a time): asking the same number again waits for the
same ask, so a `want` that timed out (`granted: false`, the ask still in line) is simply sent
again. Any call keeps the lease alive; one not heard from for `lease_seconds` is given back
with all it holds. A server without --capacity answers 400 to a new lease (and 404 to a
lease's routes: it holds none), a draining one 503; an unknown (given back, expired) lease is
404.
"""

from __future__ import annotations

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca.server.capacity import LEASE_SECONDS, SharedCapacity, UnknownLease
from barca.server.http import ApiError, Served, json, only_params


def capacity_routes(s: Served) -> list[Route]:
    def budget(of_lease: bool = False) -> SharedCapacity:
        """The shared budget; without one, a lease route is a 404 (it holds no lease)."""
        capacity = s.runs.capacity if s.runs is not None else None
        if capacity is None and of_lease:
            raise UnknownLease()
        if capacity is None:
            raise ApiError(400, "this server has no --capacity to share",
                           "start `barca serve --capacity N`, or set shared_capacity = false "
                           "in [server] of the client's barca.toml")
        return capacity

    async def open_lease(request: Request) -> Response:
        only_params(request.query_params)
        capacity = budget()
        body = await _body(request)
        if s.runs.draining or s.runs.closing:
            raise ApiError(503, "the server is shutting down: it gives no new lease",
                           "run again once it is back", kind="busy")
        run_id = body.get("run_id")
        try:
            lease = capacity.open_lease(run_id if isinstance(run_id, str) else None)
        except OverflowError as exc:
            raise ApiError(503, str(exc), "wait for runs to end", kind="busy") from None
        return json({"lease": lease, "total": capacity.total,
                     "lease_seconds": LEASE_SECONDS}, 201)

    async def want(request: Request) -> Response:
        only_params(request.query_params)
        body = await _body(request)
        ask, units = _count(body, "ask", 1), _count(body, "units", 1)
        wait = body.get("wait_seconds", 0)
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or wait < 0:
            raise ApiError(400, "wait_seconds must be a number of seconds",
                           "send wait_seconds: 0 or more")
        try:
            granted = await budget(of_lease=True).want(_lease(request), ask, units, float(wait))
        except ValueError as exc:
            raise ApiError(409, str(exc), "ask again with the number of the waiting ask")
        return json({"granted": granted})

    async def give(request: Request) -> Response:
        only_params(request.query_params)
        units = _count(await _body(request), "units", 1)
        return json({"held": budget(of_lease=True).give(_lease(request), units)})

    async def renew(request: Request) -> Response:
        only_params(request.query_params)
        await _body(request)
        return json({"held": budget(of_lease=True).give(_lease(request), 0)})

    async def close(request: Request) -> Response:
        only_params(request.query_params)
        budget(of_lease=True).close_lease(request.path_params["lease"])
        return json({"released": True})

    return [Route("/capacity/leases", _known(open_lease), methods=["POST"]),
            Route("/capacity/leases/{lease}/want", _known(want), methods=["POST"]),
            Route("/capacity/leases/{lease}/give", _known(give), methods=["POST"]),
            Route("/capacity/leases/{lease}/renew", _known(renew), methods=["POST"]),
            Route("/capacity/leases/{lease}", _known(close), methods=["DELETE"])]


def _known(handler):
    """An unknown lease (never given, given back, expired) is a 404."""
    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except UnknownLease:
            raise ApiError(404, "this server holds no such capacity lease (given back, or not "
                           f"heard from for {LEASE_SECONDS:g}s)", "open a new lease",
                           kind="not_found") from None
    return answer


def _lease(request: Request) -> str:
    return request.path_params["lease"]


def _count(body: dict, name: str, low: int) -> int:
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < 2**31:
        raise ApiError(400, f"{name} must be a whole number from {low}",
                       f"send {name}: {low} or more")
    return value


async def _body(request: Request) -> dict:
    try:
        body = orjson.loads(await request.body() or b"{}")
    except orjson.JSONDecodeError:
        raise ApiError(400, "the body is not JSON", "send a JSON object") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object", "send a JSON object")
    return body
