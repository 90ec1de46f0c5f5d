"""What a client asks the server to run: `RunRequest` (the body of `POST /runs`, the CLI's
options for `barca get|run` as JSON), checked whole before anything is matched, echoed or
started, then handed as it is to the run's process (`barca.cli.served_run`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence

import orjson

from barca.errors import UsageError

MAX_ITEMS, MAX_TEXT = 256, 4096  # a RunRequest's lists, and each text in them
MAX_FIELD_BYTES = 64 * 1024  # a field's JSON: node names and keys, never data
MAX_NAME_CHARS = 512  # a node's id is far shorter; longer text is neither matched nor echoed


@dataclass
class RunRequest:
    """What a client asks for (the body of `POST /runs`), checked by `parse_request`."""

    command: str = "get"  # get | run (| serve, from the scheduler only)
    targets: tuple[str, ...] = ()
    refresh: tuple[str, ...] = ()
    refresh_all: bool = False
    cascade: bool = True
    dry_run: bool = False
    batch: tuple[str, ...] = ()
    partition: tuple[str, ...] = ()
    output: str = "json"  # what the CLI prints on stdout: json, pretty (a remote terminal),
    # value or path (`-o value|path`: the target's values, or its result files, absolute)
    values: str | None = None  # what final_output holds when not what `output` shows
    # (`--json -o value|path`: "all" or "paths"; run_report.VALUES)
    fields: tuple[str, ...] = ()  # `--fields`: the keys of each step the JSON keeps
    value: bool = True  # False (a scheduled tick): the JSON leaves the target's value out
    # a scheduled tick (set by the scheduler only, never from a client's JSON): the job ids
    # due, comma-separated, and the tick's time, recorded with the run
    schedule_id: str | None = None
    scheduled_at: float | None = None

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "RunRequest":
        """A request kept in the queue by this or an earlier barca (unknown fields dropped)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
                      if k in names})


FIELDS = {"command": str, "targets": list, "refresh": list, "refresh_all": bool,
          "cascade": bool, "dry_run": bool, "batch": list, "partition": (list, dict),
          "files": list, "output": str, "values": str, "fields": list}
OUTPUTS = ("json", "pretty", "value", "path")  # what `-o` may ask of a server (not url)
VALUES = ("all", "paths")  # what `values` may ask final_output to hold


def parse_request(body: Any, served_files: Sequence[str]) -> RunRequest:
    """A RunRequest from a client's JSON; UsageError naming what is wrong."""
    if not isinstance(body, dict):
        raise UsageError("the request body must be a JSON object",
                         'send e.g. {"command": "get", "targets": ["summary"]}')
    for name, value in body.items():
        if name not in FIELDS:
            raise UsageError(f"unknown field {name[:40]!r}", f"fields: {', '.join(FIELDS)}")
        _check_size(name, value)  # first: a value too big or too deep is refused as such
        if not isinstance(value, FIELDS[name]) or isinstance(value, list) and not all(
                isinstance(v, str) for v in value) or isinstance(value, dict) and not all(
                isinstance(v, list) and all(isinstance(k, str) for k in v)
                for v in value.values()):
            raise UsageError(f"field {name!r} has the wrong type",
                             "see the RunRequest schema at /openapi.json")
    if body.get("command", "get") not in ("get", "run"):
        raise UsageError(f"command {body['command']!r} is not get or run", "pass get or run")
    if body.get("output", "json") not in OUTPUTS:
        raise UsageError(f"output {body['output'][:40]!r} is not one of {', '.join(OUTPUTS)}",
                         "pass json (default), pretty, value or path")
    if body.get("values", "all") not in VALUES:
        raise UsageError(f"values {body['values'][:40]!r} is not all or paths",
                         "pass all (every value) or paths (every result file), or leave it out")
    _check_fields(body.get("fields"), body.get("output", "json"))
    unknown = [f for f in body.get("files", ()) if f not in served_files]
    if unknown:
        raise UsageError(f"{', '.join(u[:100] for u in unknown[:5])} is not served here",
                         f"this server runs {', '.join(served_files) or 'no files'}")
    partition = body.get("partition", ())
    if isinstance(partition, dict):
        partition = (orjson.dumps(partition).decode(),)
    return RunRequest(body.get("command", "get"), tuple(body.get("targets", ())),
                      tuple(body.get("refresh", ())), body.get("refresh_all", False),
                      body.get("cascade", True), body.get("dry_run", False),
                      tuple(body.get("batch", ())), tuple(partition),
                      body.get("output", "json"), values=body.get("values"),
                      fields=tuple(body.get("fields", ())))


def _check_fields(fields: list[str] | None, output: str) -> None:
    """`fields` as `--fields` takes them: known step keys, with JSON output only."""
    from barca.views.run_report import STEP_FIELDS

    if fields is None:
        return
    unknown = [f for f in fields if f not in STEP_FIELDS]
    if unknown or not fields:
        raise UsageError(f"unknown field {', '.join(unknown)[:200] or 'list (empty)'} for "
                         "fields", f"valid fields: {', '.join(STEP_FIELDS)}")
    if output != "json":
        raise UsageError(f"fields selects JSON keys and cannot be used with output {output}",
                         "drop fields, or ask for output json")


def _check_size(name: str, value: Any) -> None:
    """Lists of at most MAX_ITEMS texts of at most MAX_TEXT characters, at most
    MAX_FIELD_BYTES a field, no NUL: a request names nodes and keys; anything else is refused
    before it is matched or echoed, or handed to the run."""
    items = value if isinstance(value, list) else list(value.values()) \
        if isinstance(value, dict) else [value]
    if len(items) > MAX_ITEMS:
        raise UsageError(f"field {name!r} has {len(items)} items", f"send at most {MAX_ITEMS}")
    if any(isinstance(v, str) and len(v) > MAX_TEXT for v in items):
        raise UsageError(f"field {name!r} holds a text over {MAX_TEXT} characters",
                         "send node names and keys, not data")
    try:
        size = len(orjson.dumps(value))
    except orjson.JSONEncodeError:  # nested deeper than orjson writes (a dict's values)
        raise UsageError(f"field {name!r} is nested too deeply",
                         "a partition is {dimension: [keys]}") from None
    if size > MAX_FIELD_BYTES:
        raise UsageError(f"field {name!r} is {size:,} bytes of JSON",
                         f"send at most {MAX_FIELD_BYTES // 1024} KiB a field: node names and "
                         "keys, not data")
    if any(isinstance(v, str) and "\0" in v for v in items):
        raise UsageError(f"field {name!r} holds a NUL character",
                         "node names and keys are text without NUL")


def resolve_node(graph: Any, text: str) -> str:
    """The node a client names (an id or a declared name, as the CLI takes a target); else a
    UsageError carrying the HTTP status to answer: 400 a name longer than any node's, 404 an
    unknown one, 409 an ambiguous one, in the resolver's words."""
    if len(text) > MAX_NAME_CHARS:
        raise UsageError(f"a node name of {len(text)} characters: no node is named so",
                         f"node names are at most {MAX_NAME_CHARS} characters; see GET /assets",
                         http_status=400)
    try:
        return graph.resolve_target(text)
    except UsageError as exc:
        raise UsageError(exc.message, exc.remediation,
                         http_status=409 if "ambiguous" in exc.message else 404) from None


def missing_target(request: RunRequest, graph: Any) -> str | None:
    """Why `graph` cannot run the request (a target it no longer has), None when it can."""
    for text in request.targets:
        try:
            graph.resolve_target(text)
        except UsageError as exc:
            return exc.message
    return None


@dataclass(frozen=True)
class ServedRun:
    """What a server asks its child process to do: the client's request (the fields of the
    server's `RunRequest`) and what the server decided (files, env, run id, who triggered
    it, where the result goes). Other kinds compute a read instead, and nothing runs:
    "status" `/state` (its request: `leave_out`, the node ids the server's own load left
    out), "list" `/list` (`limit`), "nodes" `/nodes` (`targets`, node ids, and `limit`),
    "view" a read-only command of a `--server` client (`command`, its raw `args`,
    `left_out`), see `barca.cli.served_views`."""

    request: dict[str, Any]
    files: tuple[str, ...]
    env: str | None
    run_id: str
    triggered_by: str
    result_path: str
    kind: str = "run"

    def to_json(self) -> bytes:
        return orjson.dumps({**self.__dict__, "files": list(self.files)})

    @classmethod
    def from_json(cls, data: bytes) -> "ServedRun":
        fields = orjson.loads(data)
        return cls(fields["request"], tuple(fields["files"]), fields["env"], fields["run_id"],
                   fields["triggered_by"], fields["result_path"], fields.get("kind", "run"))
