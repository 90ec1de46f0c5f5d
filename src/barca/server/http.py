"""What every route shares: the served state, JSON answers, the error envelope, parameters."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca.errors import BarcaError, UsageError
from barca.server.run_request import resolve_node
from barca.server.runs import Runs
from barca.server.scheduler import Scheduler
from barca.server.state import StateCache
from barca.views.node_pages import KeyPages
from barca.views.reader import reading


@dataclass
class Served:
    """What the routes read: the options, the pipeline (replaced when --watch reloads), the
    runs, the scheduler and the read caches."""

    options: Any  # ServeOptions
    pipeline: Any  # barca.engine.request.Pipeline
    runs: Runs | None = None
    scheduler: Scheduler | None = None
    state: StateCache | None = None
    pages: KeyPages | None = None
    generation: int = 0  # pipeline loads: a client seeing it change reloads the graph
    loaded_at: float = field(default_factory=time.time)  # when the pipeline was (re)loaded

    def read(self, fn, *args):
        """`fn(conn, *args)` on a connection of its own (read-only in read-only mode)."""
        with reading(self.pipeline.project.db_path, self.options.read_only) as conn:
            return fn(conn, *args)

    def node_id(self, text: str) -> str:
        """A node named as the CLI names a target (id or declared name); 404 unknown, 409
        ambiguous, in the CLI resolver's words."""
        try:
            return resolve_node(self.pipeline.graph, text)
        except UsageError as exc:
            raise ApiError(exc.context["http_status"], exc.message,
                           exc.remediation or "") from None

    def writable(self) -> None:
        if self.options.read_only:
            raise ApiError(403, "this server is read-only (--read-only): it starts and "
                           "cancels no runs", "run `barca serve` without --read-only")


class ApiError(Exception):
    def __init__(self, status: int, error: str, remediation: str = "",
                 kind: str = "usage") -> None:
        super().__init__(error)
        self.status, self.error, self.remediation, self.kind = status, error, remediation, kind


def json(body: Any, status: int = 200, headers: dict | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


MAX_DIGITS = 18  # past this a number is no count, and int() of 5,000 digits raises


def whole_number(text: str) -> int | None:
    """`text` as a count: ASCII digits only (`²` and `٣` are digits to str.isdigit), at most
    MAX_DIGITS of them; None otherwise."""
    if not (text.isascii() and text.isdigit()) or len(text) > MAX_DIGITS:
        return None
    return int(text)


def int_param(query, name: str, default: int, low: int, high: int) -> int:
    """A whole-number query parameter in low..high (as /openapi.json states each bound);
    400 otherwise."""
    text = query.get(name)
    if text is None:
        return default
    number = whole_number(text)
    if number is None or not low <= number <= high:
        shown = text if len(text) <= 20 else text[:20] + "..."
        raise ApiError(400, f"{name}={shown!r} is not a whole number in {low}..{high}",
                       f"pass ?{name}={low}..{high}")
    return number


def bool_param(query, name: str) -> bool:
    """A yes/no query parameter: 1/true or 0/false (absent: false); 400 otherwise."""
    text = query.get(name)
    if text is None or text in ("0", "false"):
        return False
    if text in ("1", "true"):
        return True
    raise ApiError(400, f"{name}={text[:20]!r} is not a yes or no", f"pass ?{name}=1 or ?{name}=0")


def only_params(query, *names: str) -> None:
    """A typed route's query names no parameter it does not know (a typo is a 400, not a
    silent default)."""
    unknown = sorted(set(query.keys()) - set(names))
    if unknown:
        raise ApiError(400, f"unknown query parameter {unknown[0][:40]!r}",
                       f"this route takes {', '.join(names) or 'no parameters'}")


def merge_methods(routes: list[Route]) -> list[Route]:
    """One route per path, dispatching on the verb, so that a wrong verb is a 405 naming
    every allowed one (Starlette stops at the first route whose path matches)."""
    by_path: dict[str, dict[str, Any]] = {}
    for route in routes:
        for method in route.methods or ():
            by_path.setdefault(route.path, {})[method] = route.endpoint
    merged = []
    for path, endpoints in by_path.items():
        async def dispatch(request: Request, endpoints=endpoints) -> Response:
            return await endpoints[request.method](request)
        merged.append(Route(path, dispatch, methods=list(endpoints)))
    return merged


async def http_error(request: Request, exc: HTTPException) -> Response:
    text = {404: f"no route {request.url.path}", 405: f"{request.method} is not allowed on "
            f"{request.url.path}"}.get(exc.status_code, exc.detail)
    return json({"error": text, "kind": "usage", "remediation": "see /openapi.json"},
                exc.status_code, exc.headers)


async def api_error(request: Request, exc: ApiError) -> Response:
    return json({"error": exc.error, "kind": exc.kind, "remediation": exc.remediation},
                exc.status)


async def barca_error(request: Request, exc: BarcaError) -> Response:
    """A usage error is a 400 unless it names its own answer (`http_status`: 404, 409)."""
    status = exc.context.get("http_status", 400) if isinstance(exc, UsageError) else 500
    return json({"error": exc.message, "kind": exc.kind, "remediation": exc.remediation},
                status)


async def crash(request: Request, exc: Exception) -> Response:
    return json({"error": f"{type(exc).__name__}: {exc}", "kind": "infra",
                 "remediation": "this is a bug in barca serve: the server's stderr has the "
                                "traceback"}, 500)
