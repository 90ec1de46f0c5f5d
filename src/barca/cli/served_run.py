"""A server's run (or one of its reads: `/state`, `/list`, `/nodes`, `GET /cli/{command}`), in
a process of its own (forked from the project's warm pool, or started fresh): its order in,
typed events out, the result printed as `barca get|run` prints it (a read's: its JSON, see
`barca.cli.served_views`).

The server writes the order (`ServedRun`, JSON) to a file given as stdin and reads two pipes:
stdout carries this run's events, one JSON object a line (`barca.views.run_events`, then an
`error` event with the error's envelope when the run ends in one); stderr carries whatever
else is said, as plain lines (notes, warnings, a library's output), never read for events. The
events pipe is moved off file descriptor 1 before anything runs, so nothing printed by the
pipeline's code can pass for an event; the result goes to the file the order names.
"""

from __future__ import annotations

import os
import sys
from typing import Any, BinaryIO

import orjson

from barca.errors import BarcaError, InfraError
from barca.server.run_request import ServedRun
from barca.views.run_events import RunEvents


class EventWriter(RunEvents):
    """Every event as one JSON line on the events pipe, flushed at once (a client follows
    the run live)."""

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self.stream = stream

    def emit(self, event: dict[str, Any]) -> None:
        try:
            self.stream.write(orjson.dumps(event, default=str) + b"\n")
            self.stream.flush()
        except BrokenPipeError:  # the server went away: the run goes on and is recorded
            pass


def main() -> int:
    """Run the order on stdin; the exit code `barca get|run` would exit with."""
    events = os.fdopen(os.dup(1), "wb")  # the events pipe, off descriptor 1
    try:
        order = ServedRun.from_json(sys.stdin.buffer.read())
        result_fd = os.open(order.result_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return _failed(events, InfraError(f"the server's run order could not be read: {exc}"),
                       json_mode=True)
    os.dup2(result_fd, 1)  # what the command prints is the run's result
    os.close(result_fd)
    json_mode = order.request.get("output", "json") == "json"
    try:
        if order.kind == "run":
            _run(order, EventWriter(events))
        elif order.kind == "status":
            _status(order)
        else:
            _read(order)
    except BarcaError as exc:
        return _failed(events, exc, json_mode)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from barca.cli.app import database_error

        error = database_error(exc)
        if error is None:
            raise
        return _failed(events, error, json_mode)
    finally:
        sys.stdout.flush()
    return 0


def _run(order: ServedRun, reporter: EventWriter) -> None:
    from barca.cli.get import run_and_print

    request = order.request
    targets = ",".join(request["targets"]) or None
    schedule = (request["schedule_id"], request["scheduled_at"]) \
        if request.get("schedule_id") and request.get("scheduled_at") is not None else None
    values = request.get("values") if request["value"] else "none"
    run_and_print(request["command"], targets, list(order.files), request["output"],
                  list(request.get("fields") or ()) or None, reporter, values,
                  absolute_paths=True, env=order.env,
                  refresh=",".join(request["refresh"]) or None,
                  refresh_all=request["refresh_all"], partition=tuple(request["partition"]),
                  cascade=request["cascade"], dry_run=request["dry_run"],
                  batch=tuple(request["batch"]), run_id=order.run_id,
                  triggered_by=order.triggered_by, schedule=schedule)


def _status(order: ServedRun) -> None:
    """`/state`: every node's status entry with its result's shape, as JSON."""
    from barca.views.status import shape, status_report

    report = status_report(None, list(order.files), order.env,
                           leave_out=order.request.get("leave_out", ()))
    for node in report.nodes:
        node["shape"] = shape(node, report.result.root)
    sys.stdout.buffer.write(orjson.dumps({"nodes": report.nodes}, default=str))


def _read(order: ServedRun) -> None:
    """A read route's view (`barca.cli.served_views`)."""
    from barca.cli import served_views

    readers = {"list": served_views.list_nodes, "nodes": served_views.status_nodes,
               "view": served_views.view}
    if order.kind not in readers:
        raise InfraError(f"the server's order is of an unknown kind {order.kind!r}",
                         "run the server and its children from one barca installation")
    readers[order.kind](order)


def _failed(events: BinaryIO, error: BarcaError, json_mode: bool) -> int:
    """Said as the command would say it (stderr), and sent as the run's `error` event."""
    from barca.cli.app import report_error

    report_error(error, json_mode)
    EventWriter(events).emit({"type": "error", "error": error.envelope(), "line": None})
    return error.exit_code


if __name__ == "__main__":
    sys.exit(main())
