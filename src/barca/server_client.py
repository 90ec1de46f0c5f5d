"""A client of a `barca serve`, shared by `--server` commands (`barca.cli.remote`) and the
Python API's `server=` (`barca.python_api`): which server is configured, the connection
(its token, an unreachable server as exit 3), answers read as JSON or as the CLI's errors,
and a run started and followed to its end through its event stream, reconnecting for
BARCA_SERVER_RECONNECT seconds when the stream drops (the same run id, even across a
restart of the server). It prints nothing: what to do with each event is the caller's.
Which server is configured is `barca.server_config`'s (imported here for the callers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Any, Callable, Iterator

import orjson

from barca.errors import BarcaError, InfraError, UsageError
from barca.server_config import configured_server

TIMEOUT_SECONDS = 30.0
RECONNECT_SECONDS = 60.0  # BARCA_SERVER_RECONNECT's default
RETRY_EVERY = 0.5  # seconds between two attempts to follow a dropped stream
RUN_ID_HEADER = "Barca-Run-Id"  # the server names the run it started in its answer
# how a run the server no longer follows ended (`GET /runs/{id}`), as an exit code
EXIT_CODES = {"success": 0, "failed": 1, "cancelled": 130}


def server_url(server: bool | str) -> str:
    """The URL a `server=` argument names: True the configured server, else the URL."""
    if server is True:
        configured = configured_server()
        if configured is None:
            raise UsageError("server=True asks for the configured server, and none is "
                             "configured", "set [server] url in barca.toml or BARCA_SERVER, "
                             "or pass server=\"http://...\"")
        return configured.url
    if not isinstance(server, str) or "://" not in server:
        raise UsageError(f"server={server!r} is not a server's URL",
                         "pass server=True (BARCA_SERVER) or server=\"http://host:port\"")
    return server


def auth_headers() -> dict[str, str]:
    """The server's token, from BARCA_SERVER_TOKEN (never a flag: command lines are public)."""
    token = os.environ.get("BARCA_SERVER_TOKEN", "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def reconnect_seconds() -> float:
    """BARCA_SERVER_RECONNECT: how long a dropped run stream is retried (0: not at all)."""
    text = os.environ.get("BARCA_SERVER_RECONNECT", "").strip()
    if not text:
        return RECONNECT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise UsageError(f"BARCA_SERVER_RECONNECT={text[:40]!r} is not a number of seconds",
                         "set it to 0 (no retry) or more seconds, or unset it (60)")
    return seconds


@contextlib.contextmanager
def connected(url: str) -> Iterator[Any]:
    """An HTTP client on the server; a server that cannot be reached is exit 3 naming it."""
    import httpx

    client = httpx.Client(base_url=url.rstrip("/"), timeout=TIMEOUT_SECONDS,
                          headers=auth_headers())
    try:
        yield client
    except httpx.TransportError as exc:
        raise InfraError(f"cannot reach the barca server at {url}: {exc}",
                         "start it with `barca serve`, check --server / BARCA_SERVER, or pass "
                         "--local to run here") from None
    finally:
        client.close()


def answer(response) -> Any:
    """A JSON answer; an error answer becomes the CLI's error (and exit code)."""
    try:
        body = response.json()
    except ValueError:
        raise InfraError(f"the server answered {response.status_code} without JSON",
                         "is --server the address of `barca serve`?") from None
    if response.status_code < 400:
        return body
    raise error_of(body, 2 if response.status_code < 500 else 3)


def error_of(envelope: dict, exit_code: int) -> BarcaError:
    """The error an envelope describes, of the class its exit code names (a step failed,
    usage, cancelled, infra), exiting as it says (or with `exit_code`)."""
    from barca.errors import Cancelled, StepFailed

    code = envelope["code"] if isinstance(envelope.get("code"), int) else exit_code
    kind = {1: StepFailed, 2: UsageError, 130: Cancelled}.get(code, BarcaError)
    error = kind(envelope.get("error", "error"), envelope.get("remediation"))
    error.exit_code, error.kind = code, envelope.get("kind", error.kind)
    return error


def start_run(client, request: dict) -> str:
    """`POST /runs`: the id of the run the server started (or answered at its end: a dry
    run, or a request the run refused, whose lines and exit code its events carry)."""
    response = client.post("/runs", content=orjson.dumps(request),
                           headers={"Content-Type": "application/json"})
    return response.headers.get(RUN_ID_HEADER) or answer(response)["run_id"]


class Interrupts:
    """Ctrl-C (or SIGTERM) while a run is asked for and followed cancels it on the server
    (`DELETE /runs/{id}`); the caller follows it until it stopped (the CLI exits 130, the
    Python API raises `Cancelled`, as a local run does) and a second signal raises
    KeyboardInterrupt at once. Set before the run is asked for: a signal while the server is
    accepting it cancels it the moment its id is known, instead of leaving it running there.
    Only the main thread gets signals: elsewhere nothing is set."""

    def __init__(self, client) -> None:
        self.client = client
        self.run_id: str | None = None
        self.signals = 0
        self.previous: dict = {}

    def __enter__(self) -> "Interrupts":
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self._signalled)
                             for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)

    def started(self, run_id: str) -> str:
        """The run's id, once the server answered; cancelled now if a signal came before."""
        self.run_id = run_id
        if self.signals:
            self._cancel()
        return run_id

    def _signalled(self, signum, frame) -> None:
        self.signals += 1
        if self.signals > 1:
            raise KeyboardInterrupt
        if self.run_id is not None:
            self._cancel()

    def _cancel(self) -> None:
        try:
            self.client.delete(f"/runs/{self.run_id}")
        except Exception:  # already ended, or the server is away: following tells
            pass


def follow(client, run_id: str, on_event: Callable[[dict], None]) -> dict:
    """Each event of the run to `on_event` as it comes, then its `run_finished` event. A
    stream that drops is followed again from the last event seen, for
    `reconnect_seconds()`; past that, exit 3 naming the run."""
    import httpx

    window, last, deadline = reconnect_seconds(), 0, None
    while True:
        try:
            ended, seen, dropped = _stream(client, run_id, last, on_event)
            if ended is not None:
                return ended
            # the server ended the stream without the run's end (it no longer follows the
            # run: restarted, say): has the run ended? A stream that dropped is followed
            # again instead, for the end the server still holds (with the command's stdout)
            ended = None if dropped else _ended_run(client, run_id)
            if ended is not None:
                return ended
        except (httpx.TransportError, _Gone):
            seen = last
        if seen != last:
            last, deadline = seen, None  # it moved on: a new drop gets a new window
        deadline = deadline if deadline is not None else time.monotonic() + window
        if time.monotonic() >= deadline:
            raise InfraError(f"lost the event stream of run {run_id} on the server "
                             f"{client.base_url}" + (f" for {window:g}s" if window else ""),
                             f"the run may go on there: see `barca history {run_id} --server "
                             f"{client.base_url}`; BARCA_SERVER_RECONNECT sets how long to "
                             "retry")
        time.sleep(RETRY_EVERY)


class _Gone(Exception):
    """The server answered, but cannot stream the run now (restarting, or not yet resumed)."""


def _stream(client, run_id: str, after: int, on_event) -> tuple[dict | None, int, bool]:
    """Follow the events after `after`: (the final event or None, the last id seen, whether
    the stream dropped rather than ended)."""
    import httpx

    with client.stream("GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": str(after)},
                       timeout=httpx.Timeout(TIMEOUT_SECONDS, read=None)) as response:
        if response.status_code == 204:
            return None, after, False
        if response.status_code >= 400:
            response.read()
            if response.status_code in (404, 409) or response.status_code >= 500:
                raise _Gone()
            answer(response)
        event_id = after
        try:
            for line in response.iter_lines():
                if line.startswith("id: "):
                    event_id = int(line[4:])
                elif line.startswith("data: "):
                    event = orjson.loads(line[6:])
                    if event["type"] == "run_finished" and "exit_code" in event:
                        return event, event_id, False
                    if event["type"] != "run_finished":
                        on_event(event)
        except httpx.TransportError:
            return None, event_id, True
        return None, event_id, False


def _ended_run(client, run_id: str) -> dict | None:
    """A run the server no longer streams (it ended while the stream was down, or before a
    restart): a `run_finished` event built from its record; None while it runs."""
    response = client.get(f"/runs/{run_id}")
    if response.status_code == 404:
        raise _Gone()
    run = answer(response)["run"]
    status = run["status"]
    if status in ("pending", "running"):
        return None
    code = EXIT_CODES.get(status, 3)
    error = None if code == 0 else {
        "error": f"run {run_id} ended {status} on the server"
                 + (f": {run['error']}" if run.get("error") else ""),
        "kind": "infra" if code == 3 else status,
        "remediation": f"see `barca history {run_id}` on the server"}
    return {"type": "run_finished", "run_id": run_id, "status": status, "exit_code": code,
            "error": error, "stdout": "", "stdout_bytes": 0, "rebuilt": True}


def served_value(server: bool | str, request: dict) -> Any:
    """`barca.get|run(..., server=)`: the run `request` (a RunRequest) on the server, its
    target's value: the result's bytes (`GET /runs/{id}/output`) for one unpartitioned
    target, decoded (JSON as Python values, parquet as a pyarrow Table, anything else as
    bytes); else the run's JSON `final_output` ({key: value} for a partitioned target). A
    failed run raises the error the same call raises here."""
    with connected(server_url(server)) as client:
        with Interrupts(client) as interrupts:
            run_id = interrupts.started(start_run(client, {**request, "output": "json",
                                                           "values": "all"}))
            ended = follow(client, run_id, lambda event: None)
        if ended["exit_code"] != 0:
            raise error_of(ended.get("error") or {"error": f"run {run_id} ended "
                           f"{ended.get('status')} on the server"}, ended["exit_code"])
        body = ended.get("outcome")
        if body is None:
            body = answer(client.get(f"/runs/{run_id}/stdout"))
        targets = request.get("targets") or []
        step = next((s for s in body.get("steps", ()) if len(targets) == 1 and targets[0] in
                     (s["id"], s["id"].rpartition(":")[2])), None)
        if step is None or "partitions" in step:
            return body.get("final_output")
        return _decoded(client.get(f"/runs/{run_id}/output"))


def _decoded(response) -> Any:
    if response.status_code >= 400:
        answer(response)
    media = response.headers.get("content-type", "").split(";")[0]
    if media == "application/json":
        return orjson.loads(response.content)
    if media == "application/vnd.apache.parquet":
        import io

        import pyarrow.parquet as pq

        return pq.read_table(io.BytesIO(response.content))
    return response.content
