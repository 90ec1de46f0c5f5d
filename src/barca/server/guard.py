"""What every request passes before a route sees it: the server's answer to a hostile browser
page, another local user and a careless script (threat model in `barca docs serve`).

In order, each refusal a JSON error that names the fix:
- The request's path and query are at most MAX_TARGET_BYTES (414): no route needs more, and
  a route that names what it did not find then never echoes megabytes.
- `Host` must name this server (the bound address, `localhost`, a loopback address, a name
  given with `--allow-host`, or any IP address when bound to all of them): a page that
  rebinds its own DNS name to 127.0.0.1 sends its own name, and is refused (421).
- With a token, every request but `GET /health` and the UI's static files needs
  `Authorization: Bearer <token>` (401), compared in constant time.
- A request that changes something (any verb but GET/HEAD) from a browser page of another
  origin is refused (403): `Sec-Fetch-Site`, which current browsers send, must say
  `same-origin` (the UI's own page, also behind a proxy) or `none`; `Origin` (`null`
  included) must name this server's host. Scripts send neither and pass.
- Such a request's body, if any, and its declared type, if any, must be `application/json`
  (415): a plain HTML form (even one without fields) or a `text/plain` fetch cannot start a
  run, and a JSON fetch from another site must first be preflighted, which nothing here
  allows.
- A body is read whole before the route runs, at most MAX_BODY_BYTES (LEDGER_BODY_BYTES for
  the ledger's routes, whose posts carry a run's results) (413, refused from
  `Content-Length` before reading on) and within BODY_SECONDS (408); framed once (400 for
  both `Content-Length` and `Transfer-Encoding`: a proxy in front that reads the other one
  would see a different request, and uvicorn keeps such a connection open).
Every answer carries headers that keep the UI out of other sites' frames.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
from typing import Any, Awaitable, Callable, Iterable

import orjson

MAX_BODY_BYTES = 1024 * 1024
# a ledger post carries a run's results as columns (a few hundred bytes a key): 200,000 keys
LEDGER_BODY_BYTES = 64 * 1024 * 1024
LEDGER_PATHS = ("/ledger/lookup", "/ledger/runs")
MAX_TARGET_BYTES = 8192  # path and query, as most servers allow a request line
BODY_SECONDS = 10.0
SAFE_METHODS = ("GET", "HEAD")
SECURITY_HEADERS = [(b"x-frame-options", b"DENY"),
                    (b"content-security-policy", b"frame-ancestors 'none'"),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer")]
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class Refused(Exception):
    def __init__(self, status: int, error: str, remediation: str,
                 headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
        super().__init__(error)
        self.status, self.error, self.remediation = status, error, remediation
        self.headers = list(headers)


class Guard:
    """ASGI middleware in front of the app (see the module docstring)."""

    def __init__(self, app: Callable, bound_host: str, allow_hosts: Iterable[str] = (),
                 token: str | None = None) -> None:
        self.app, self.token = app, token.encode() if token else None
        self.names = {h.lower().strip("[]") for h in (bound_host, *LOOPBACK_NAMES,
                                                      *allow_hosts)}
        self.any_ip = ipaddress.ip_address(bound_host).is_unspecified

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_security_headers(send)
        try:
            _check_target(scope)
            headers = _headers(scope)
            host = self._check_host(headers)
            self._check_token(scope, headers)
            if scope["method"] not in SAFE_METHODS:
                _check_origin(headers, host)
                _check_content_type(headers)
            receive = await _read_body(headers, receive, LEDGER_BODY_BYTES if scope["path"]
                                       in LEDGER_PATHS else MAX_BODY_BYTES)
        except Refused as refused:
            await _refuse(send, refused)
            return
        await self.app(scope, receive, send)

    def _check_host(self, headers: dict[bytes, bytes]) -> str:
        """The request's host name, if it names this server."""
        name = host_name(headers.get(b"host", b"").decode("latin-1"))
        if name in self.names or (self.any_ip and _is_ip(name)):
            return name
        shown = name[:100] or "(none)"
        raise Refused(421, f"this server does not answer to the host name {shown!r}",
                      "address it by its IP address or localhost, or start it with "
                      f"`barca serve --allow-host {shown}` if that name is yours")

    def _check_token(self, scope: Scope, headers: dict[bytes, bytes]) -> None:
        if self.token is None or _open_without_token(scope):
            return
        given = headers.get(b"authorization", b"")
        scheme, _, value = given.partition(b" ")
        if scheme.lower() == b"bearer" and hmac.compare_digest(value.strip(), self.token):
            return
        raise Refused(401, "this server needs its token" if not given else
                      "the token sent is not this server's token",
                      "send `Authorization: Bearer <token>` (the CLI sends BARCA_SERVER_TOKEN; "
                      "the web UI asks for it)", [(b"www-authenticate", b'Bearer realm="barca"')])


def host_name(host: str) -> str:
    """The name part of a Host header or an origin's authority, lower-case, without port or
    IPv6 brackets: `[::1]:8274` -> `::1`, `LocalHost:80` -> `localhost`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _open_without_token(scope: Scope) -> bool:
    """`GET /health` (monitors) and the UI's files (the page that asks for the token); none
    of them holds anything of the project's."""
    path = scope["path"]
    return scope["method"] in SAFE_METHODS and (
        path in ("/health", "/", "/ui") or path.startswith("/ui/"))


def _check_target(scope: Scope) -> None:
    size = len(scope.get("raw_path") or scope["path"]) + len(scope.get("query_string", b""))
    if size > MAX_TARGET_BYTES:
        raise Refused(414, f"the request's path and query are {size:,} bytes",
                      f"at most {MAX_TARGET_BYTES:,}: name nodes, runs and keys, not data")


def _check_origin(headers: dict[bytes, bytes], host: str) -> None:
    site = headers.get(b"sec-fetch-site", b"").lower()
    if site and site not in (b"same-origin", b"none"):
        # a browser's own word (pages cannot set it): stricter than the Origin check below,
        # it also refuses a page of another port of this machine (`same-site`)
        raise Refused(403, "a page of another origin cannot start or change anything here",
                      "use the web UI served by this server, or a script (curl, barca "
                      "--server)")
    origin = headers.get(b"origin")
    if origin is None:
        return
    text = origin.decode("latin-1").strip()
    scheme, sep, authority = text.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or host_name(authority) != host:
        raise Refused(403, f"a request from the page origin {text[:100]!r} cannot start or "
                      "change anything here",
                      "use the web UI served by this server, or a script (curl, barca "
                      "--server); behind a proxy, give the proxy's name with --allow-host")


def _check_content_type(headers: dict[bytes, bytes]) -> None:
    """A body, or a declared type (an HTML form with no field sends `Content-Length: 0`),
    must be JSON; a bare `curl -X POST` declares none and passes."""
    if not _has_body(headers) and b"content-type" not in headers:
        return
    kind = headers.get(b"content-type", b"").split(b";", 1)[0].strip().lower()
    if kind != b"application/json":
        raise Refused(415, "a request that starts or changes anything takes a JSON body",
                      "send it with `Content-Type: application/json`")


def _has_body(headers: dict[bytes, bytes]) -> bool:
    return b"transfer-encoding" in headers or headers.get(b"content-length", b"0") not in (
        b"0", b"")


async def _read_body(headers: dict[bytes, bytes], receive: Receive, limit: int) -> Receive:
    """The body read whole (at most `limit` bytes, within BODY_SECONDS), replayed to the app;
    `receive` as it was when there is no body."""
    if not _has_body(headers):
        return receive
    if b"transfer-encoding" in headers and b"content-length" in headers:
        raise Refused(400, "a request with both Content-Length and Transfer-Encoding",
                      "send one of them")
    length = headers.get(b"content-length", b"")
    if length and (not length.isdigit() or len(length) > 12 or int(length) > limit):
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0

    async def read_all() -> None:
        nonlocal size
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise Refused(400, "the client went away while sending the body", "")
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > limit:
                raise _too_large(limit)
            if not message.get("more_body", False):
                return

    try:
        await asyncio.wait_for(read_all(), BODY_SECONDS)
    except asyncio.TimeoutError:
        raise Refused(408, f"the request body did not arrive within {BODY_SECONDS:g}s",
                      "send the whole body at once") from None
    body, sent = b"".join(chunks), False

    async def replay() -> dict:
        nonlocal sent
        if sent:
            return await receive()  # after the body: the disconnect, when it comes
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}
    return replay


def _too_large(limit: int) -> Refused:
    return Refused(413, f"the request body is over {limit // 1024} KiB",
                   "a run request is a few hundred bytes: send targets, not data")


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers by lower-case name (the first of repeated ones)."""
    out: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        out.setdefault(name.lower(), value)
    return out


def _with_security_headers(send: Send) -> Send:
    async def sending(message: dict) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()),
                                               *SECURITY_HEADERS]}
        await send(message)
    return sending


async def _refuse(send: Send, refused: Refused) -> None:
    body = orjson.dumps({"error": refused.error, "kind": "usage",
                         "remediation": refused.remediation})
    await send({"type": "http.response.start", "status": refused.status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *refused.headers]})
    await send({"type": "http.response.body", "body": body})
