"""Read queries behind the inspect commands: runs, one run's steps, captured logs, node stats.

This module is the one callers import; the queries live by subject beside it:
history_rows (the row types), history_runs (run rows, and `running` rows whose process is
gone shown and written as `interrupted`), history_steps (one run's steps and log lines),
history_nodes (one node across runs, the figures `barca stats` reports) and history_results
(which artifact a node's state or a run points to).

Everything here returns plain data; sentences and tables belong to `barca.cli`. Nothing here
creates the database: callers pass the connection `db.connect(create=False)` gave them.
"""

from __future__ import annotations

from barca.store.history_nodes import (last_materializations, median, node_stats, node_summary,
                                       percentile, recent_durations)
from barca.store.history_results import (current_artifacts, latest_results, output_hashes,
                                         result_of_run)
from barca.store.history_rows import (CallSummary, Latest, LogRow, NodeStats, NodeSummary,
                                      RunRow, StepRow)
from barca.store.history_runs import (changed_stamp, count_matching_runs, count_runs, get_run,
                                      list_runs, live_runs_started, mark_cancelled, match_runs,
                                      newest_run, reconcile_interrupted, recorded_runs)
from barca.store.history_steps import (call_step_ids, call_summaries, count_steps, last_logs,
                                       node_summaries, output_tail, run_logs, run_steps,
                                       step_ids, step_sample)

__all__ = [
    "CallSummary", "Latest", "LogRow", "NodeStats", "NodeSummary", "RunRow", "StepRow",
    "call_step_ids", "call_summaries", "changed_stamp", "count_matching_runs", "count_runs",
    "count_steps", "current_artifacts", "get_run", "last_logs", "last_materializations",
    "latest_results", "list_runs", "live_runs_started", "mark_cancelled", "match_runs",
    "median", "newest_run", "node_stats", "node_summaries", "node_summary", "output_hashes",
    "output_tail", "percentile", "recent_durations", "recorded_runs", "reconcile_interrupted",
    "result_of_run", "run_logs", "run_steps", "step_ids", "step_sample",
]
