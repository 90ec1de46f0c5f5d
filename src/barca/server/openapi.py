"""The OpenAPI 3.1 document of the server's routes, served at `/openapi.json`. Written by
hand, next to the routes it describes; a test checks that the two name the same paths."""

from __future__ import annotations

from typing import Any

from barca.server.openapi_schemas import BOOL, INT, LABEL, SCHEMAS, STR, obj, ref
from barca.server.routes_views import MAX_LIMIT


def _json(schema: dict, description: str = "OK") -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict:
    return _json(ref("Error"), description)




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
               "responses": {"200": _json(ref("RunHandle")),
                             **{str(c): _error(ERRORS[c]) for c in (400, 403, 404, 409, 503)}}}
    paths = {
        "/health": {"get": _get("Liveness, version and what failed to load",
                                _json(ref("Health")))},
        "/assets": {"get": _get("Every node of the served pipeline",
                                _json({"type": "array", "items": ref("Asset")}))},
        "/assets/{name}": {"get": _get("One node and its timings",
                                       _json(ref("AssetDetail")), 404, 409,
                                       params=[_path_param("name")])},
        "/state": {"get": _get("Every node's cache state, durations and next run",
                               _json({"type": "array", "items": ref("NodeState")}), 500)},
        "/assets/{name}/partitions": {"get": _get(
            "A partitioned node's keys that have a result, paged, with failures grouped",
            _json(ref("PartitionPage")), 400, 404, 409, params=[
                _path_param("name"),
                {"name": "status", "in": "query", "required": False,
                 "schema": {"enum": ["success", "failed"]}},
                {"name": "q", "in": "query", "required": False, "schema": STR},
                {"name": "error", "in": "query", "required": False, "schema": STR},
                _count("offset", 0, 10**9), _count("limit", 1, 500)])},
        "/schedule": {"get": _get("Scheduled jobs: next and last fire",
                                  _json({"type": "array", "items": ref("Job")}))},
        "/runs": {
            "get": _get("Recent runs, newest first (recorded and in flight)", _json(ref("Runs")),
                        400, params=[_count("limit", 1, 1000), _count("offset", 0, 10**9)]),
            "post": {"summary": "Start a run (barca get/run with the CLI's options)",
                     "requestBody": {"required": False, "content": {"application/json": {
                         "schema": ref("RunRequest")}}},
                     "responses": {"202": {**_json(ref("RunHandle"), "accepted"),
                                           "headers": RUN_ID_HEADER},
                                   "200": {**_json(ref("DryRun"), "dry run (ended)"),
                                           "headers": RUN_ID_HEADER},
                                   **{str(c): _error(ERRORS[c])
                                      for c in (400, 403, 404, 409, 500, 503)}}}},
        "/runs/{run_id}": {
            "get": _get("One run: its steps, logs and result", _json(ref("RunDetail")), 404,
                        params=run_id),
            "delete": {"summary": "Cancel a run in flight", "parameters": run_id,
                       "responses": {"200": _json(ref("Cancellation")),
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
        "/logs/{run_id}": {"get": _get("What a run's steps printed", _json(ref("Logs")),
                                       params=run_id)},
        "/get/{target}": {"post": {**trigger, "summary": "Start `barca get TARGET`"}},
        "/run/{target}": {"post": {**trigger, "summary": "Start `barca run TARGET "
                                                          "--refresh-all`"}},
        "/status/{run_id}": {"get": _get("A run this server started (kept an hour)",
                                         _json(ref("RunState")), 404, params=run_id)},
        "/openapi.json": {"get": _get("This document", _json({"type": "object"}))},
        "/list": {"get": _get("`barca list --json`: every node, its kind, freshness and "
                              "inputs", _json(ref("NodeList")), 400, 500, params=PAGING)},
        "/nodes": {"get": _get(
            "`barca status --json`: each node's cache state and why (of the targets' cone; "
            "`targets` answer as node ids)", _json(ref("NodeStatuses")), 400, 404, 409, 500,
            params=[_query("targets", STR), *PAGING])},
        "/history": {"get": _get("`barca history --json`: recent runs, newest first",
                                 _json(ref("History")), 400, 500, params=PAGING)},
        "/history/{run_id}": {"get": _get(
            "`barca history RUN_ID --json`: one run's steps (RUN_ID or a unique prefix)",
            _json(ref("HistoryDetail")), 400, 404, 409, 500,
            params=[_path_param("run_id"), _count("limit", 1, MAX_LIMIT)])},
        "/stats/{name}": {"get": _get(
            "`barca stats NAME --json`: a node's timings, failures and re-execution rate",
            _json(ref("NodeStats")), 400, 404, 409, 500, params=[_path_param("name")])},
        "/cli/{command}": {"get": _get(
            "Run a read-only command (status, list, history, logs or stats) for a `--server` "
            "client: its arguments parsed by the command's parser and checked (no --env, "
            "--server, --local, logs --follow; files must be served ones), its output and "
            "exit code. get and run are 404s: a dry run runs sensors, start it with POST "
            "/runs", _json(ref("CommandOutput")), 400, 404, 409,
            params=[_path_param("command"), {"name": "arg", "in": "query", "required": False,
                                             "schema": {"type": "array", "items": STR},
                                             "style": "form", "explode": True}])},
    }
    paths.update(_project_paths())
    paths.update(_ops_paths(trigger))
    paths.update(_key_paths())
    paths.update(_schedule_paths())
    paths.update(_ledger_paths())
    paths.update(_capacity_paths())
    paths["/events/{run_id}"] = {"get": {**paths["/runs/{run_id}/events"]["get"],
                                         "summary": "The older name of /runs/{run_id}/events"}}
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


def _project_paths() -> dict:
    return {
        "/plan": {"get": _get("`barca plan --json` of the served files: phases, capacity, "
                              "weights", _json(ref("Plan")), 400)},
        "/groups": {"get": _get("The served files' group(...)s, as `barca list --groups "
                                "--json` lists them",
                                _json({"type": "array", "items": ref("NodeGroup")}), 400)},
        "/project": {"get": _get("What is served: root, environment, load time, git commit, "
                                 "each file's sha256", _json(ref("Project")), 400)},
        "/materializations": {"get": _get(
            "Every recorded execution, newest first, a page at a time",
            _json(ref("Materializations")), 400,
            params=[_count("limit", 1, 10_000), _count("offset", 0, 10**12)])},
        "/sql/views": {"get": _get(
            "The files each `barca sql` view reads (the server runs no SQL); ?files= of "
            "these served files (comma-separated)", _json(ref("SqlViews")), 400, 404, 500,
            params=[_query("files", STR)])},
        "/runs/{run_id}/logs": {"get": _get(
            "`barca logs RUN_ID --json`: the recorded lines (?step= a name, node id or "
            "one key; ?stream=)", _json(ref("RunLogs")), 400, 404, 409,
            params=[_path_param("run_id"), _query("step", STR),
                    _query("stream", {"enum": ["stdout", "stderr"]})])},
    }


def _ledger_paths() -> dict:
    lookup = _post("The ledger: which results the team's record holds, in request order "
                   "(`hashes`), or the hits of each node's columns (`nodes`)",
                   _json(ref("LedgerAnswer")), 400, body=ref("LedgerLookup"))
    runs = _post("The ledger: record a client's successful run once the store holds each "
                 "result it names with that digest (409 otherwise, nothing recorded; a "
                 "known run id answers the run as stored)", _json(ref("LedgerRecorded")),
                 400, 403, 409, 503, body=ref("LedgerPost"))
    runs["responses"] = {"201": runs["responses"].pop("200"), **runs["responses"]}
    return {"/ledger/lookup": {"post": lookup}, "/ledger/runs": {"post": runs}}


def _capacity_paths() -> dict:
    """A ledger client's share of --capacity (`server.routes_capacity`)."""
    lease = [_path_param("lease")]
    opened = _post("Open a lease on the server's --capacity for a client's run (400 without "
                   "--capacity, 503 draining)", _json(ref("CapacityLease")), 400, 503,
                   body=obj({"run_id": STR}, []))
    opened["responses"] = {"201": opened["responses"].pop("200"), **opened["responses"]}
    held = _json(obj({"held": INT}))
    return {
        "/capacity/leases": {"post": opened},
        "/capacity/leases/{lease}/want": {"post": _post(
            "Ask for more units (ask numbers one at a time; the same number again waits for "
            "the same ask), waiting up to wait_seconds for the grant",
            _json(obj({"granted": BOOL})), 400, 404, 409, params=lease,
            body=ref("CapacityWant"))},
        "/capacity/leases/{lease}/give": {"post": _post(
            "Give units back", held, 400, 404, params=lease, body=ref("CapacityUnits"))},
        "/capacity/leases/{lease}/renew": {"post": _post(
            "Keep the lease (one not heard from for lease_seconds is given back)", held,
            400, 404, params=lease)},
        "/capacity/leases/{lease}": {"delete": _get(
            "Give the lease back, with all it holds", _json(obj({"released": BOOL})), 404,
            params=lease)},
    }


def _post(summary: str, ok: dict, *errors: int, params: list | None = None,
          body: dict | None = None) -> dict:
    op = _get(summary, ok, *errors, params=params)
    if body is not None:
        op["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": body}}}
    return op


def _ops_paths(trigger: dict) -> dict:
    job = [_path_param("job")]
    return {
        "/run": {"post": {**trigger, "summary": "Start `barca get` of every asset and sensor",
                          "parameters": []}},
        "/queue": {"get": _get("The runs running and waiting, and whether the queue is "
                               "paused", _json(ref("Queue")), 400)},
        "/queue/pause": {"post": _post(
            "Start no run until resumed (runs in flight go on, new ones wait; kept across "
            "restarts)", _json(ref("Queue")), 400, 403)},
        "/queue/resume": {"post": _post("Start the waiting runs again, in order",
                                        _json(ref("Queue")), 400, 403)},
        "/schedule/{job}/pause": {"post": _post(
            "Fire this scheduled node no more (until ?until=, RFC 3339, or until resumed; "
            "kept across restarts; skipped ticks are not caught up)",
            _json(ref("SchedulePause")), 400, 403, 404, 409,
            params=job + [_query("until", {"type": "string", "format": "date-time"})])},
        "/schedule/{job}/resume": {"post": _post(
            "Fire this scheduled node on its cron again", _json(ref("SchedulePause")),
            400, 403, 404, 409, params=job)},
        "/state/reset": {"post": _post(
            "Empty the metadata database (every run, execution and key state; the server's "
            "pauses are kept), after copying it to metadata.db.reset-<UTC> beside it; "
            "artifacts stay on disk", _json(ref("StateReset")), 400, 403, 409, 503,
            body=ref("ResetRequest"))},
    }


def _key_paths() -> dict:
    """A key's routes (`server.routes_keys`): its attempts and its value's preview."""
    params = [_path_param("name"), _query("key", LABEL)]
    return {
        "/assets/{name}/attempts": {"get": _get(
            "A key's attempts, newest first, each with its run, error and traceback (the "
            "user's frames); ?key= names the key of a partitioned node",
            _json(ref("KeyAttempts")), 400, 404, 409,
            params=[*params, _query("run", STR), _count("limit", 1, 200)])},
        "/assets/{name}/value": {"get": _get(
            "A preview of a key's newest stored value: JSON pretty-printed, a table's first "
            "rows", _json(ref("KeyValue")), 400, 404, 409, params=params)},
    }


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


def _schedule_paths() -> dict:
    """A scheduled job's fires (`server.routes_schedule`)."""
    job = [_path_param("job")]
    return {
        "/schedule/{job}/fires": {"get": _get(
            "A scheduled node's next fires (?next=, in the server's time zone; none when "
            "nothing fires) and the last runs its fires started (?runs=), newest first",
            _json(ref("JobFires")), 400, 404, 409,
            params=job + [_count("next", 1, 20), _count("runs", 1, 100)])},
        "/schedule/{job}/fire": {"post": {**_post(
            "Start the run a tick of this scheduled node starts, now (paused or not; its "
            "cron is unchanged); never while its last run is in flight",
            _json(ref("JobFired")), 400, 403, 404, 409, 503, params=job),
            "responses": {"202": _json(ref("JobFired"), "started, or waiting for a slot"),
                          **{str(c): _error(ERRORS[c]) for c in (400, 403, 404, 409, 503)}}}},
    }
