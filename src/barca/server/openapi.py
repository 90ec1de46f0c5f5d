"""The OpenAPI 3.1 document of the server's routes, served at `/openapi.json`. Written by
hand, next to the routes it describes; a test checks that the two name the same paths."""

from __future__ import annotations

from typing import Any

from barca.server.routes_views import MAX_LIMIT


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict, description: str = "OK") -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict:
    return _json(_ref("Error"), description)


STR, NUM, INT, BOOL = {"type": "string"}, {"type": "number"}, {"type": "integer"}, {"type": "boolean"}
NULL_STR, NULL_NUM = {"type": ["string", "null"]}, {"type": ["number", "null"]}
NULL_INT = {"type": ["integer", "null"]}
STRS = {"type": "array", "items": STR}
# every moment an answer holds (views.times.iso_time) and every partition key (its label)
TIME_PATTERN = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"
TIME = {"type": "string", "format": "date-time", "pattern": TIME_PATTERN,
        "description": "RFC 3339, UTC, milliseconds", "examples": ["2026-12-05T16:30:18.123Z"]}
NULL_TIME = {**TIME, "type": ["string", "null"]}
LABEL = {"type": "string", "description": "a partition key's label: `dim=key`, several "
                                          "dimensions `dim1=a,dim2=b` (names sorted)",
         "examples": ["retailer=r03", "day=d1,region=eu"]}
NULL_LABEL = {**LABEL, "type": ["string", "null"]}
LABELS = {"type": "array", "items": LABEL}


def _object(properties: dict, required: list[str] | None = None, extra: bool = False) -> dict:
    schema = {"type": "object", "properties": properties,
              "required": list(properties) if required is None else required}
    if not extra:
        schema["additionalProperties"] = False
    return schema

# a node's newest execution in its `barca status --json` entry (the fields that follow rules)
LAST_MATERIALIZATION = {"type": ["object", "null"], "properties": {
    "created_at": NULL_TIME, "partition": LABEL}}

SCHEMAS = {
    "Error": _object({"error": STR, "kind": STR, "remediation": STR, "code": INT,
                      "node": STR, "traceback": STR, "artifact_dir": STR}, ["error"]),
    "LoadError": _object({"file": STR, "error": STR, "affected_nodes": STRS, "node": STR,
                          "remediation": STR}, ["file", "error", "affected_nodes"]),
    "Health": _object({"status": {"const": "ok"}, "version": STR, "read_only": BOOL,
                       "scheduler": BOOL, "load_errors": {"type": "array",
                                                          "items": _ref("LoadError")},
                       "generation": INT}),
    "Asset": _object({"id": STR, "name": STR, "kind": {"enum": ["asset", "task", "sensor"]},
                      "freshness": _object({"type": {"enum": ["Always", "Manual", "Schedule"]},
                                            "value": STR}, ["type"]),
                      "inputs": STRS, "env": STRS, "partitioned": BOOL, "batch": NULL_STR}),
    "Stats": _object({"node_id": STR, "total_runs": INT, "failures": INT,
                      "cache_hit_rate": NULL_NUM, "median_elapsed_seconds": NULL_NUM,
                      "p95_elapsed_seconds": NULL_NUM,
                      "recent_runs": {"type": "array", "items": _object({
                          "key": NULL_LABEL, "status": STR, "elapsed_seconds": NULL_NUM,
                          "created_at": TIME, "error_message": NULL_STR,
                          "attempts": {"type": ["integer", "null"]}})}}),
    "AssetDetail": _object({"asset": _ref("Asset"), "stats": _ref("Stats")}),
    "Job": _object({"id": STR, "cron": STR, "kind": STR,
                    "next_fire": NULL_TIME, "last_fired": NULL_TIME,
                    "last_run": NULL_STR, "last_status": NULL_STR,
                    "last_run_status": NULL_STR}),
    "RunRequest": _object({
        "command": {"enum": ["get", "run"]}, "targets": STRS, "files": STRS,
        "refresh": STRS, "refresh_all": BOOL, "cascade": BOOL, "dry_run": BOOL,
        "batch": STRS, "partition": {"oneOf": [STRS, {"type": "object", "additionalProperties":
                                                       STRS}]}}, []),
    "RunHandle": _object({"run_id": STR}),
    "Cancellation": _object({"run_id": STR, "status": {"const": "cancelling"}}),
    "RunSummary": _object({
        "id": STR, "run_id": STR, "command": STR, "files": STRS, "target": NULL_STR,
        "status": {"enum": ["pending", "running", "success", "failed", "cancelled",
                            "interrupted"]},
        "triggered_by": NULL_STR, "started_at": NULL_TIME, "finished_at": NULL_TIME,
        "elapsed_seconds": NULL_NUM, "steps_total": {"type": ["integer", "null"]},
        "steps_executed": INT, "steps_cached": INT, "error": NULL_STR}),
    "Runs": _object({"runs": {"type": "array", "items": _ref("RunSummary")}, "total": INT,
                     "truncated": BOOL}),
    "Log": _object({"node_id": STR, "seq": INT, "stream": STR, "line": STR}),
    "Logs": _object({"logs": {"type": "array", "items": _ref("Log")}}),
    "RunDetail": _object({
        "run": _ref("RunSummary"),
        "steps": {"type": "array", "items": _object({
            "node_id": STR, "step_id": STR, "key": NULL_LABEL, "status": STR,
            "elapsed_seconds": NULL_NUM, "error": NULL_STR})},
        "nodes": {"type": "array", "items": _object({
            "node_id": STR, "keys": INT, "failed": INT, "elapsed_seconds": NUM, "calls": INT})},
        "logs": {"type": "array", "items": _ref("Log")},
        "failure_groups": {"type": "array", "items": _object({
            "error": STR, "node_id": STR, "count": INT, "sample_steps": STRS})},
        "result": {"description": "the JSON `barca get --json` printed, while the server "
                                  "keeps the run (an hour)"}}),
    "RunState": _object({
        "handle": STR, "status": {"enum": ["pending", "running", "complete", "failed",
                                           "cancelled"]},
        "result": {}, "error": NULL_STR, "started_at": TIME, "finished_at": NULL_TIME}),
    "DryRun": {"type": "object", "description": "the JSON `barca get --dry-run --json` prints"},
    "StatusPartitions": _object({
        "total": INT, "cached": INT, "missing": INT, "missing_keys": STRS, "failed": INT,
        "failed_keys": STRS, "blocked": INT, "blocked_keys": STRS,
        "shares": {**_object({"cached": INT, "stale": INT, "failed": INT, "blocked": INT}),
                   "description": "the keys in four parts that add up to total"},
        "failed_still_cached": INT}),
    "NodeState": {"type": "object", "required": ["id", "kind", "cache", "durations", "next_run"],
                  "description": "a node's `barca status --json` entry, plus durations and "
                                 "next_run",
                  "properties": {"id": STR, "kind": STR, "cache": {"type": "object"},
                                 "partitions": _ref("StatusPartitions"),
                                 "last_materialization": LAST_MATERIALIZATION,
                                 "durations": {"type": ["object", "null"]},
                                 "next_run": NULL_TIME}},
    "PartitionPage": _object({
        "node_id": STR, "total": INT, "failed": INT, "matched": INT, "offset": INT,
        "keys": {"type": "array", "items": _object({
            "key": LABEL, "status": STR, "run_hash": NULL_STR, "error_type": NULL_STR,
            "error": NULL_STR, "created_at": NULL_TIME})},
        "next_offset": {"type": ["integer", "null"]},
        "failures": {"type": "array", "items": _object({
            "error": STR, "error_type": NULL_STR, "count": INT, "sample_keys": LABELS})},
        "failure_groups": {"type": "array", "items": _object({
            "error": STR, "error_type": NULL_STR, "count": INT, "sample_keys": LABELS,
            "at_least": BOOL, "generic": BOOL})},
        "failed_ungrouped": INT}),
    "CommandOutput": _object({"exit_code": INT, "stdout": STR, "stderr": STR}),
    # the CLI's --json bodies (`barca list`, `status`, `history`, `stats`), as it prints them
    "NodeList": _object({
        "root": STR, "total": INT, "truncated": BOOL, "hint": STR,
        "nodes": {"type": "array", "items": _object({
            "id": STR, "kind": STR, "freshness": STR, "schedule": STR, "next_fire": TIME,
            "inputs": STRS, "env": STRS, "partitions": STRS},
            ["id", "kind", "freshness", "inputs", "env", "partitions"])}},
        ["root", "nodes", "total", "truncated"]),
    "NodeStatuses": _object({
        "target": NULL_STR, "targets": STRS, "root": STR, "total": INT, "truncated": BOOL,
        "hint": STR, "summary": {"type": "object", "additionalProperties": INT},
        "nodes": {"type": "array", "items": {
            "type": "object", "description": "a node's `barca status --json` entry",
            "required": ["id", "name", "kind", "inputs", "partitioned", "cache",
                         "last_materialization", "shape", "env"],
            "properties": {"id": STR, "name": STR, "kind": STR, "inputs": STRS,
                           "partitioned": BOOL, "cache": {"type": "object"},
                           "partitions": _ref("StatusPartitions"),
                           "last_materialization": LAST_MATERIALIZATION,
                           "env": STRS}}}},
        ["target", "targets", "summary", "root", "nodes", "total", "truncated"]),
    "HistoryRun": _object({
        "run_id": STR, "command": STR, "files": STRS, "target": NULL_STR, "job": NULL_STR,
        "status": STR, "steps_total": NULL_INT, "steps_executed": NULL_INT,
        "steps_cached": NULL_INT, "attempts": INT, "started_at": NULL_TIME,
        "finished_at": NULL_TIME, "elapsed_seconds": NULL_NUM, "triggered_by": NULL_STR,
        "scheduled_at": NULL_TIME, "schedule_id": NULL_STR, "failed_node": NULL_STR,
        "error": NULL_STR, "failure": {"type": ["object", "null"]}}),
    "History": _object({"runs": {"type": "array", "items": _ref("HistoryRun")},
                        "total": INT, "truncated": BOOL, "hint": STR},
                       ["runs", "total", "truncated"]),
    "HistoryDetail": _object({
        "run": _ref("HistoryRun"), "hint": STR,
        "steps": {"type": "array", "items": {
            "type": "object", "description": "a step of `barca history RUN_ID --json`",
            "properties": {"partition_key": NULL_LABEL, "created_at": NULL_TIME}}},
        "steps_page": {"type": "object"}}, ["run", "steps", "steps_page"]),
    "NodeStats": _object({
        "id": STR, "kind": STR, "total_runs": INT, "failures": INT, "rerun_rate": NULL_NUM,
        "cache_hit_rate": NULL_NUM, "avg_elapsed_seconds": NULL_NUM,
        "median_elapsed_seconds": NULL_NUM, "p95_elapsed_seconds": NULL_NUM,
        "max_elapsed_seconds": NULL_NUM, "max_rss_bytes": NULL_INT,
        "median_max_rss_bytes": NULL_INT,
        "recent_runs": {"type": "array", "items": _object({
            "run_id": STR, "partition_key": NULL_LABEL, "elapsed_seconds": NULL_NUM,
            "status": STR, "created_at": NULL_TIME, "error_message": NULL_STR,
            "attempts": NULL_INT, "cpu_seconds": NULL_NUM, "max_rss_bytes": NULL_INT})}}),
}


def _get(summary: str, ok: dict, *errors: int, params: list | None = None) -> dict:
    op = {"summary": summary, "responses": {"200": ok}}
    for code in errors:
        op["responses"][str(code)] = _error(ERRORS[code])
    if params:
        op["parameters"] = params
    return op


ERRORS = {400: "bad request", 403: "read-only server", 404: "not found",
          405: "wrong verb", 409: "ambiguous name, or the run already ended",
          500: "barca failed", 503: "busy or shutting down"}


def _path_param(name: str) -> dict:
    return {"name": name, "in": "path", "required": True, "schema": STR}


MAX_COUNT = 10**18 - 1  # a count has at most 18 digits


def _query(name: str, schema: dict) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema}


def _count(name: str, low: int, high: int = MAX_COUNT) -> dict:
    return _query(name, {"type": "integer", "minimum": low, "maximum": high})


PAGING = [_count("limit", 1, MAX_LIMIT), _query("all", BOOL)]
RUN_ID_HEADER = {"Barca-Run-Id": {
    "description": "the run started: its events and stdout stay readable an hour, also "
                   "when the answer comes at its end (a dry run, a refused request)",
    "schema": STR}}


def document(version: str) -> dict[str, Any]:
    run_id = [_path_param("run_id")]
    trigger = {"summary": "", "parameters": [_path_param("target")],
               "responses": {"200": _json(_ref("RunHandle")),
                             **{str(c): _error(ERRORS[c]) for c in (400, 403, 404, 409, 503)}}}
    paths = {
        "/health": {"get": _get("Liveness, version and what failed to load",
                                _json(_ref("Health")))},
        "/assets": {"get": _get("Every node of the served pipeline",
                                _json({"type": "array", "items": _ref("Asset")}))},
        "/assets/{name}": {"get": _get("One node and its timings",
                                       _json(_ref("AssetDetail")), 404, 409,
                                       params=[_path_param("name")])},
        "/state": {"get": _get("Every node's cache state, durations and next run",
                               _json({"type": "array", "items": _ref("NodeState")}), 500)},
        "/assets/{name}/partitions": {"get": _get(
            "A partitioned node's keys that have a result, paged, with failures grouped",
            _json(_ref("PartitionPage")), 400, 404, 409, params=[
                _path_param("name"),
                {"name": "status", "in": "query", "required": False,
                 "schema": {"enum": ["success", "failed"]}},
                {"name": "q", "in": "query", "required": False, "schema": STR},
                {"name": "error", "in": "query", "required": False, "schema": STR},
                _count("offset", 0, 10**9), _count("limit", 1, 500)])},
        "/schedule": {"get": _get("Scheduled jobs: next and last fire",
                                  _json({"type": "array", "items": _ref("Job")}))},
        "/runs": {
            "get": _get("Recent runs, newest first (recorded and in flight)", _json(_ref("Runs")),
                        400, params=[_count("limit", 1, 1000), _count("offset", 0, 10**9)]),
            "post": {"summary": "Start a run (barca get/run with the CLI's options)",
                     "requestBody": {"required": False, "content": {"application/json": {
                         "schema": _ref("RunRequest")}}},
                     "responses": {"202": {**_json(_ref("RunHandle"), "accepted"),
                                           "headers": RUN_ID_HEADER},
                                   "200": {**_json(_ref("DryRun"), "dry run (ended)"),
                                           "headers": RUN_ID_HEADER},
                                   **{str(c): _error(ERRORS[c])
                                      for c in (400, 403, 404, 409, 500, 503)}}}},
        "/runs/{run_id}": {
            "get": _get("One run: its steps, logs and result", _json(_ref("RunDetail")), 404,
                        params=run_id),
            "delete": {"summary": "Cancel a run in flight", "parameters": run_id,
                       "responses": {"200": _json(_ref("Cancellation")),
                                     **{str(c): _error(ERRORS[c]) for c in (403, 404, 409)}}}},
        "/runs/{run_id}/events": {"get": {
            "summary": "The run's progress as server-sent events (ids; Last-Event-ID resumes)",
            "parameters": run_id + [{"name": "after", "in": "query", "required": False,
                                     "schema": {"type": "integer", "minimum": 0,
                                                "maximum": 10**12 - 1}}],
            "responses": {"200": {"description": "event stream",
                                  "content": {"text/event-stream": {"schema": STR}}},
                          "204": {"description": "the stream already ended"},
                          "404": _error(ERRORS[404]),
                          "409": _error("a run in flight that this server did not start")}}},
        "/runs/{run_id}/output": {"get": {
            "summary": "The stored bytes of the run's result (its target, or ?node=; ?key= "
                       "for a partitioned node)",
            "parameters": run_id + [{"name": n, "in": "query", "required": False,
                                     "schema": STR} for n in ("node", "key")],
            "responses": {"200": {"description": "the result file, typed by its format",
                                  "content": {t: {"schema": STR} for t in (
                                      "application/json", "application/vnd.apache.parquet",
                                      "text/csv", "application/octet-stream")}},
                          **{str(c): _error(ERRORS[c]) for c in (400, 404, 409)}}}},
        "/runs/{run_id}/stdout": {"get": {
            "summary": "What the run's command printed on stdout, whole (the last event "
                       "carries it only up to 256 KiB); kept an hour after the run",
            "parameters": run_id,
            "responses": {"200": {"description": "the text", "content": {
                "text/plain": {"schema": STR}}}, "404": _error(ERRORS[404])}}},
        "/logs/{run_id}": {"get": _get("What a run's steps printed", _json(_ref("Logs")),
                                       params=run_id)},
        "/get/{target}": {"post": {**trigger, "summary": "Start `barca get TARGET`"}},
        "/run/{target}": {"post": {**trigger, "summary": "Start `barca run TARGET "
                                                          "--refresh-all`"}},
        "/status/{run_id}": {"get": _get("A run this server started (kept an hour)",
                                         _json(_ref("RunState")), 404, params=run_id)},
        "/openapi.json": {"get": _get("This document", _json({"type": "object"}))},
        "/list": {"get": _get("`barca list --json`: every node, its kind, freshness and "
                              "inputs", _json(_ref("NodeList")), 400, 500, params=PAGING)},
        "/nodes": {"get": _get(
            "`barca status --json`: each node's cache state and why (of the targets' cone; "
            "`targets` answer as node ids)", _json(_ref("NodeStatuses")), 400, 404, 409, 500,
            params=[_query("targets", STR), *PAGING])},
        "/history": {"get": _get("`barca history --json`: recent runs, newest first",
                                 _json(_ref("History")), 400, 500, params=PAGING)},
        "/history/{run_id}": {"get": _get(
            "`barca history RUN_ID --json`: one run's steps (RUN_ID or a unique prefix)",
            _json(_ref("HistoryDetail")), 400, 404, 409, 500,
            params=[_path_param("run_id"), _count("limit", 1, MAX_LIMIT)])},
        "/stats/{name}": {"get": _get(
            "`barca stats NAME --json`: a node's timings, failures and re-execution rate",
            _json(_ref("NodeStats")), 400, 404, 409, 500, params=[_path_param("name")])},
        "/cli/{command}": {"get": _get(
            "Run a read-only command (status, list, history, logs or stats) for a `--server` "
            "client: its arguments parsed by the command's parser and checked (no --env, "
            "--server, --local, logs --follow; files must be served ones), its output and "
            "exit code. get and run are 404s: a dry run runs sensors, start it with POST "
            "/runs", _json(_ref("CommandOutput")), 400, 404, 409,
            params=[_path_param("command"), {"name": "arg", "in": "query", "required": False,
                                             "schema": {"type": "array", "items": STR},
                                             "style": "form", "explode": True}])},
    }
    paths.update(_key_paths())
    _guarded(paths)
    return {"openapi": "3.1.0",
            "info": {"title": "barca serve", "version": version,
                     "description": "Loopback by default. A server started with a token "
                                    "(--token, BARCA_SERVE_TOKEN) needs `Authorization: Bearer "
                                    "<token>` on every route but GET /health. See `barca docs "
                                    "serve`, Security."},
            "security": [{"bearer": []}, {}], "paths": paths,
            "components": {"schemas": SCHEMAS, "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"}}}}


def _key_paths() -> dict:
    """A key's routes (`server.routes_keys`): its attempts and its value's preview."""
    params = [_path_param("name"), _query("key", LABEL)]
    return {
        "/assets/{name}/attempts": {"get": _get(
            "A key's attempts, newest first, each with its run, error and traceback (the "
            "user's frames); ?key= names the key of a partitioned node",
            _json(_ref("KeyAttempts")), 400, 404, 409,
            params=[*params, _query("run", STR), _count("limit", 1, 200)])},
        "/assets/{name}/value": {"get": _get(
            "A preview of a key's newest stored value: JSON pretty-printed, a table's first "
            "rows", _json(_ref("KeyValue")), 400, 404, 409, params=params)},
    }


SCHEMAS.update({
    "KeyAttempt": _object({
        "run_id": STR, "step_id": STR, "status": STR, "attempts": NULL_INT,
        "elapsed_seconds": NULL_NUM, "created_at": TIME, "error_type": NULL_STR,
        "error_message": NULL_STR, "error_traceback": NULL_STR, "worker_exit": NULL_STR,
        "format": NULL_STR, "size_bytes": NULL_INT}),
    "KeyAttempts": _object({"node_id": STR, "key": NULL_LABEL, "attempts": {
        "type": "array", "items": _ref("KeyAttempt")}}),
    "KeyValue": _object({
        "kind": {"enum": ["json", "table", "none", "opaque"]}, "reason": STR,
        "run_id": STR, "created_at": TIME, "format": NULL_STR, "size_bytes": NULL_INT,
        "text": STR, "truncated": BOOL, "num_rows": INT, "columns": STRS,
        "rows": {"type": "array", "items": STRS}}, ["kind"]),
})


GUARD_ERRORS = {"401": "the server's token is missing or wrong",
                "421": "the Host header does not name this server"}
CHANGE_ERRORS = {"403": "read-only server, or a request from another site's page",
                 "408": "the body did not arrive in time", "413": "the body is over 1 MiB",
                 "415": "the body is not application/json"}


def _guarded(paths: dict) -> None:
    """The answers of the guard in front of every route (server/guard.py)."""
    for path, operations in paths.items():
        for method, op in operations.items():
            errors = dict(GUARD_ERRORS) if path != "/health" else {"421": GUARD_ERRORS["421"]}
            if method not in ("get", "head"):
                errors.update(CHANGE_ERRORS)
            for code, text in errors.items():
                op["responses"].setdefault(code, _error(text))
            if path == "/health":
                op["security"] = [{}]
