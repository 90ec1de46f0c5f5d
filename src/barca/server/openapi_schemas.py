"""The types of what `barca serve` answers and takes, as JSON Schema: the `components`
of `/openapi.json` (`server.openapi` writes its paths)."""

from __future__ import annotations


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


STR, NUM, INT = {"type": "string"}, {"type": "number"}, {"type": "integer"}
BOOL = {"type": "boolean"}
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


def obj(properties: dict, required: list[str] | None = None, extra: bool = False) -> dict:
    schema = {"type": "object", "properties": properties,
              "required": list(properties) if required is None else required}
    if not extra:
        schema["additionalProperties"] = False
    return schema

# a node's newest execution in its `barca status --json` entry (the fields that follow rules)
LAST_MATERIALIZATION = {"type": ["object", "null"], "properties": {
    "created_at": NULL_TIME, "partition": LABEL}}

# the ledger's wire form (engine.ledger_server): a node's results as columns, one value a key
_COLUMN = {"type": "array"}
_NODE_HASHES = obj({"node_id": STR, "keys": STRS, "run_hashes": STRS})
LEDGER_SCHEMAS = {
    "LedgerLookup": obj({"hashes": {"type": "array", "items": obj(
                             {"node_id": STR, "run_hash": STR, "key": STR},
                             ["node_id", "run_hash"])},
                         "nodes": {"type": "array", "items": _NODE_HASHES}}, []),
    "LedgerAnswer": obj({"results": {"type": "array", "items": obj({
                             "node_id": STR, "run_hash": STR, "exists": BOOL, "path": NULL_STR,
                             "format": NULL_STR, "size_bytes": NULL_INT,
                             "digest": NULL_STR})},
                         "nodes": {"type": "array", "items": obj({
                             "node_id": STR, "found": {"type": "array", "items": _COLUMN,
                                                       "description": "[index, path, format, "
                                                       "size_bytes, digest] of each hit"}})}}),
    "LedgerPost": obj({"run": obj({"run_id": STR, "status": {"enum": ["success"]}}, ["run_id"],
                                  extra=True),
                       "steps": {"type": "array", "items": obj({
                           "node_id": STR, "keys": STRS, "run_hashes": STRS, "paths": STRS,
                           "labels": _COLUMN, "contexts": {}, "signatures": {},
                           "formats": {}, "sizes": {}, "digests": {}, "elapsed": {}},
                           ["node_id", "keys", "run_hashes", "paths"])},
                       "objects": {"type": "object", "additionalProperties": obj(
                           {"digest": STR, "size": NULL_INT}, ["digest"])},
                       "contexts": {"type": "object"}}, ["run", "steps"]),
    "LedgerRecorded": obj({"run_id": STR, "bytes_changed": BOOL, "recorded": BOOL}),
}

SCHEMAS = {
    "Error": obj({"error": STR, "kind": STR, "remediation": STR, "code": INT,
                      "node": STR, "traceback": STR, "artifact_dir": STR}, ["error"]),
    "LoadError": obj({"file": STR, "error": STR, "affected_nodes": STRS, "node": STR,
                          "remediation": STR}, ["file", "error", "affected_nodes"]),
    "Health": obj({"status": {"enum": ["ok", "draining"]}, "version": STR,
                   "api_version": INT, "read_only": BOOL,
                   "store": {"type": ["object", "null"], "properties": {"uri": STR, "env": STR},
                             "required": ["uri", "env"], "additionalProperties": False},
                   "capacity": {"type": ["object", "null"], "properties": {
                       "total": INT, "in_use": INT, "waiting": INT},
                       "additionalProperties": False},
                       "scheduler": BOOL, "load_errors": {"type": "array",
                                                          "items": ref("LoadError")},
                       "generation": INT}),
    "Asset": obj({"id": STR, "name": STR, "kind": {"enum": ["asset", "task", "sensor"]},
                      "freshness": obj({"type": {"enum": ["Always", "Manual", "Schedule"]},
                                            "value": STR}, ["type"]),
                      "inputs": STRS, "env": STRS, "partitioned": BOOL, "batch": NULL_STR}),
    "Stats": obj({"node_id": STR, "total_runs": INT, "failures": INT,
                      "cache_hit_rate": NULL_NUM, "median_elapsed_seconds": NULL_NUM,
                      "p95_elapsed_seconds": NULL_NUM,
                      "recent_runs": {"type": "array", "items": obj({
                          "key": NULL_LABEL, "status": STR, "elapsed_seconds": NULL_NUM,
                          "created_at": TIME, "error_message": NULL_STR,
                          "attempts": {"type": ["integer", "null"]}})}}),
    "AssetDetail": obj({"asset": ref("Asset"), "stats": ref("Stats")}),
    "Job": obj({"id": STR, "cron": STR, "kind": STR,
                    "next_fire": NULL_TIME, "last_fired": NULL_TIME,
                    "last_run": NULL_STR, "last_status": NULL_STR,
                    "paused": BOOL, "paused_until": NULL_TIME,
                    "paused_reason": NULL_STR, "failures": INT, "max_failures": INT,
                    "failing": BOOL, "timeout_seconds": NULL_NUM,
                    "last_run_status": NULL_STR}),
    "RunRequest": obj({
        "command": {"enum": ["get", "run"]}, "targets": STRS, "files": STRS,
        "refresh": STRS, "refresh_all": BOOL, "cascade": BOOL, "dry_run": BOOL,
        "batch": STRS, "partition": {"oneOf": [STRS, {"type": "object", "additionalProperties":
                                                       STRS}]},
        "output": {"enum": ["json", "pretty", "value", "path"],
                   "description": "what the run prints on stdout (its `run_finished` event and "
                                  "GET /runs/{id}/stdout): as --json, --pretty, -o value, "
                                  "-o path (absolute paths)"},
        "values": {"enum": ["all", "paths"], "description": "with output json: final_output "
                                                             "holds every value, or every "
                                                             "result path (--json -o value|path)"},
        "fields": {**STRS, "description": "with output json: the keys of each step kept "
                                          "(--fields)"}}, []),
    "RunHandle": obj({"run_id": STR}),
    "Cancellation": obj({"run_id": STR, "status": {"const": "cancelling"}}),
    "RunSummary": obj({
        "id": STR, "run_id": STR, "command": STR, "files": STRS, "target": NULL_STR,
        "status": {"enum": ["pending", "running", "success", "failed", "cancelled",
                            "interrupted"]},
        "triggered_by": NULL_STR, "started_at": NULL_TIME, "finished_at": NULL_TIME,
        "elapsed_seconds": NULL_NUM, "steps_total": {"type": ["integer", "null"]},
        "steps_executed": INT, "steps_cached": INT, "error": NULL_STR}),
    "Runs": obj({"runs": {"type": "array", "items": ref("RunSummary")}, "total": INT,
                     "truncated": BOOL}),
    "Log": obj({"node_id": STR, "seq": INT, "stream": STR, "line": STR}),
    "Logs": obj({"logs": {"type": "array", "items": ref("Log")}}),
    "RunDetail": obj({
        "run": ref("RunSummary"),
        "steps": {"type": "array", "items": obj({
            "node_id": STR, "step_id": STR, "key": NULL_LABEL, "status": STR,
            "elapsed_seconds": NULL_NUM, "error": NULL_STR})},
        "nodes": {"type": "array", "items": obj({
            "node_id": STR, "keys": INT, "failed": INT, "elapsed_seconds": NUM, "calls": INT})},
        "logs": {"type": "array", "items": ref("Log")},
        "failure_groups": {"type": "array", "items": obj({
            "error": STR, "node_id": STR, "count": INT, "sample_steps": STRS})},
        "result": {"description": "the JSON `barca get --json` printed, while the server "
                                  "keeps the run (an hour)"}}),
    "RunState": obj({
        "handle": STR, "status": {"enum": ["pending", "running", "complete", "failed",
                                           "cancelled"]},
        "result": {}, "error": NULL_STR, "started_at": TIME, "finished_at": NULL_TIME}),
    "DryRun": {"type": "object", "description": "the JSON `barca get --dry-run --json` prints"},
    "StatusPartitions": obj({
        "total": INT, "cached": INT, "missing": INT, "missing_keys": STRS, "failed": INT,
        "failed_keys": STRS, "blocked": INT, "blocked_keys": STRS,
        "shares": {**obj({"cached": INT, "stale": INT, "failed": INT, "blocked": INT}),
                   "description": "the keys in four parts that add up to total"},
        "failed_still_cached": INT}),
    "NodeState": {"type": "object", "required": ["id", "kind", "cache", "durations", "next_run"],
                  "description": "a node's `barca status --json` entry, plus durations and "
                                 "next_run",
                  "properties": {"id": STR, "kind": STR, "cache": {"type": "object"},
                                 "partitions": ref("StatusPartitions"),
                                 "last_materialization": LAST_MATERIALIZATION,
                                 "durations": {"type": ["object", "null"]},
                                 "next_run": NULL_TIME}},
    "PartitionPage": obj({
        "node_id": STR, "total": INT, "failed": INT, "matched": INT, "offset": INT,
        "keys": {"type": "array", "items": obj({
            "key": LABEL, "status": STR, "run_hash": NULL_STR, "error_type": NULL_STR,
            "error": NULL_STR, "created_at": NULL_TIME})},
        "next_offset": {"type": ["integer", "null"]},
        "failures": {"type": "array", "items": obj({
            "error": STR, "error_type": NULL_STR, "count": INT, "sample_keys": LABELS})},
        "failure_groups": {"type": "array", "items": obj({
            "error": STR, "error_type": NULL_STR, "count": INT, "sample_keys": LABELS,
            "at_least": BOOL, "generic": BOOL})},
        "failed_ungrouped": INT}),
    "CommandOutput": obj({"exit_code": INT, "stdout": STR, "stderr": STR}),
    # the CLI's --json bodies (`barca list`, `status`, `history`, `stats`), as it prints them
    "NodeList": obj({
        "root": STR, "total": INT, "truncated": BOOL, "hint": STR,
        "nodes": {"type": "array", "items": obj({
            "id": STR, "kind": STR, "freshness": STR, "schedule": STR, "next_fire": TIME,
            "inputs": STRS, "env": STRS, "partitions": STRS},
            ["id", "kind", "freshness", "inputs", "env", "partitions"])}},
        ["root", "nodes", "total", "truncated"]),
    "NodeStatuses": obj({
        "target": NULL_STR, "targets": STRS, "root": STR, "total": INT, "truncated": BOOL,
        "hint": STR, "summary": {"type": "object", "additionalProperties": INT},
        "nodes": {"type": "array", "items": {
            "type": "object", "description": "a node's `barca status --json` entry",
            "required": ["id", "name", "kind", "inputs", "partitioned", "cache",
                         "last_materialization", "shape", "env"],
            "properties": {"id": STR, "name": STR, "kind": STR, "inputs": STRS,
                           "partitioned": BOOL, "cache": {"type": "object"},
                           "partitions": ref("StatusPartitions"),
                           "last_materialization": LAST_MATERIALIZATION,
                           "env": STRS, "undeclared_env": STRS}}}},
        ["target", "targets", "summary", "root", "nodes", "total", "truncated"]),
    "HistoryRun": obj({
        "run_id": STR, "command": STR, "files": STRS, "target": NULL_STR, "job": NULL_STR,
        "status": STR, "steps_total": NULL_INT, "steps_executed": NULL_INT,
        "steps_cached": NULL_INT, "attempts": INT, "started_at": NULL_TIME,
        "finished_at": NULL_TIME, "elapsed_seconds": NULL_NUM, "triggered_by": NULL_STR,
        "scheduled_at": NULL_TIME, "schedule_id": NULL_STR, "failed_node": NULL_STR,
        "error": NULL_STR, "failure": {"type": ["object", "null"]}}),
    "History": obj({"runs": {"type": "array", "items": ref("HistoryRun")},
                        "total": INT, "truncated": BOOL, "hint": STR},
                       ["runs", "total", "truncated"]),
    "HistoryDetail": obj({
        "run": ref("HistoryRun"), "hint": STR,
        "steps": {"type": "array", "items": {
            "type": "object", "description": "a step of `barca history RUN_ID --json`",
            "properties": {"partition_key": NULL_LABEL, "created_at": NULL_TIME}}},
        "steps_page": {"type": "object"}}, ["run", "steps", "steps_page"]),
    "NodeStats": obj({
        "id": STR, "kind": STR, "total_runs": INT, "failures": INT, "rerun_rate": NULL_NUM,
        "cache_hit_rate": NULL_NUM, "avg_elapsed_seconds": NULL_NUM,
        "median_elapsed_seconds": NULL_NUM, "p95_elapsed_seconds": NULL_NUM,
        "max_elapsed_seconds": NULL_NUM, "max_rss_bytes": NULL_INT,
        "median_max_rss_bytes": NULL_INT,
        "recent_runs": {"type": "array", "items": obj({
            "run_id": STR, "partition_key": NULL_LABEL, "elapsed_seconds": NULL_NUM,
            "status": STR, "created_at": NULL_TIME, "error_message": NULL_STR,
            "attempts": NULL_INT, "cpu_seconds": NULL_NUM, "max_rss_bytes": NULL_INT})}}),
}

QUEUED_RUN = obj({"run_id": STR, "command": STR, "targets": STRS, "triggered_by": STR,
                      "accepted_at": NULL_TIME, "position": INT},
                     ["run_id", "command", "targets", "triggered_by", "accepted_at"])
SCHEMAS.update({  # the operator's routes and the project's reads (routes_ops, routes_project)
    "Plan": {"type": "object", "description": "the JSON `barca plan` prints",
             "required": ["plan_version", "total_steps", "phases", "warnings"],
             "properties": {"plan_version": INT, "total_steps": INT, "pool_size": INT,
                            "capacity": INT, "weights": {"type": "object"},
                            "phases": {"type": "array"}, "warnings": {"type": "array"}}},
    "NodeGroup": obj({"id": STR, "name": STR, "description": NULL_STR, "members": STRS,
                          "output": NULL_STR}),
    "Project": obj({"api_version": INT, "root": STR, "env": STR, "deployed_at": TIME,
                        "commit": NULL_STR, "files": {"type": "array", "items": obj({
                            "path": STR, "sha256": NULL_STR})}}),
    "Materializations": obj({
        "materializations": {"type": "array", "items": obj({
            "run_id": STR, "node_id": STR, "step_id": STR, "partition_key": NULL_LABEL,
            "status": STR, "run_hash": STR, "artifact_path": NULL_STR, "format": NULL_STR,
            "size_bytes": NULL_INT, "output_hash": NULL_STR, "elapsed_seconds": NULL_NUM,
            "attempts": NULL_INT, "error_type": NULL_STR, "error_message": NULL_STR,
            "max_rss_bytes": NULL_INT, "cpu_seconds": NULL_NUM, "worker_exit": NULL_STR,
            "batch": NULL_STR, "created_at": NULL_TIME})},
        "total": INT, "offset": INT, "truncated": BOOL}),
    "SqlViews": obj({
        "views": {"type": "array", "items": obj({
            "name": STR, "node": STR, "kind": STR, "partitioned": BOOL, "format": STR,
            "files": {"type": "array", "items": obj({
                "path": {**STR, "description": "under the project root; a small result is "
                                               "`<pack>@<offset>:<length>`, a range of a pack"},
                "partition": NULL_LABEL, "content_hash": NULL_STR})},
            "stale": {"type": ["boolean", "null"]}, "run_hash": NULL_STR})},
        "missing": {"type": "array", "items": obj({
            "node": STR, "reason": {"enum": ["no_result", "pickle"]},
            "name": {**STR, "description": "the view's name"}, "kind": STR})},
        "duplicates": {"type": "array", "items": obj({"name": STR, "ids": STRS})}}),
    "RunLogs": obj({"run_id": STR, "logs": {"type": "array", "items": obj({
        "step_id": STR, "node_id": STR, "partition_key": NULL_LABEL,
        "stream": {"enum": ["stdout", "stderr"]}, "ts": NULL_TIME, "line": STR})}}),
    "Queue": obj({"paused": BOOL, "paused_at": NULL_TIME, "draining": BOOL,
                      "max_runs": INT, "running": {"type": "array", "items": QUEUED_RUN},
                      "queued": {"type": "array", "items": QUEUED_RUN},
                      "capacity": {"oneOf": [{"type": "null"}, ref("Capacity")]}}),
    "Capacity": obj({"total": INT, "source": {"const": "--capacity"}, "in_use": INT,
                     "runs": {"type": "array", "items": obj({"run_id": NULL_STR,
                                                             "units": INT})},
                     "waiting": {"type": "array", "items": obj({
                         "run_id": NULL_STR, "weight": INT, "waiting_seconds": NUM})}}),
    "CapacityLease": obj({"lease": STR, "total": INT, "lease_seconds": NUM}),
    "CapacityWant": obj({"ask": INT, "units": INT, "wait_seconds": NUM}, ["ask", "units"]),
    "CapacityUnits": obj({"units": INT}, ["units"]),
    "SchedulePause": obj({"id": STR, "paused": BOOL, "paused_until": NULL_TIME}),
    "ResetRequest": obj({"confirm": {"const": True}}),
    "StateReset": obj({"database": STR, "backup": STR, "runs_removed": INT,
                           "materializations_removed": INT, "undo": STR}),
})


# a key's routes (server.routes_keys)
SCHEMAS.update({
    "KeyAttempt": obj({
        "run_id": STR, "step_id": STR, "status": STR, "attempts": NULL_INT,
        "elapsed_seconds": NULL_NUM, "created_at": TIME, "error_type": NULL_STR,
        "error_message": NULL_STR, "error_traceback": NULL_STR, "worker_exit": NULL_STR,
        "format": NULL_STR, "size_bytes": NULL_INT}),
    "KeyAttempts": obj({"node_id": STR, "key": NULL_LABEL, "attempts": {
        "type": "array", "items": ref("KeyAttempt")}}),
    "KeyValue": obj({
        "kind": {"enum": ["json", "table", "none", "opaque"]}, "reason": STR,
        "run_id": STR, "created_at": TIME, "format": NULL_STR, "size_bytes": NULL_INT,
        "text": STR, "truncated": BOOL, "num_rows": INT, "columns": STRS,
        "rows": {"type": "array", "items": STRS}}, ["kind"]),
})


# a scheduled job as the web UI operates it (server.routes_schedule)
SCHEMAS.update({
    "JobFires": obj({
        "id": STR, "cron": STR, "timezone": NULL_STR,
        "next_fires": {"type": "array", "items": TIME},
        "runs": {"type": "array", "items": {
            **SCHEMAS["RunSummary"], "properties": {**SCHEMAS["RunSummary"]["properties"],
                                                    "scheduled_at": NULL_TIME},
            "required": [*SCHEMAS["RunSummary"]["required"], "scheduled_at"]}}}),
    "JobFired": obj({"id": STR, "run_id": STR}),
})
SCHEMAS.update(LEDGER_SCHEMAS)
