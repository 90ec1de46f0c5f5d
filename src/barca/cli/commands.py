"""The `barca` command group as data: its commands, what it says of itself and its examples.

Kept free of click so that `barca --help` and `barca --version` can be answered without
importing it (`barca.cli.top_help`); `barca.cli.app` builds the click group from the same
data.
"""

from __future__ import annotations

ABOUT = """barca: cached Python functions as a dependency graph.

Decorate functions with @asset, @sensor and @task; barca runs only what changed, down to
the single partition key, and keeps every result under .barca/. From Python:
barca.get, barca.run, barca.plan, barca.history and barca.stats (barca docs python).
"""

EPILOG = """\b
Examples:
  barca get summary pipeline.py            compute summary and what it needs
  barca get summary pipeline.py --dry-run  what would run, and why
  barca run publish pipeline.py            run a task (its asset inputs come from cache)
  barca status pipeline.py                 freshness of every node
  barca list pipeline.py                   every node, kind and inputs
"""

# name -> (module, attribute, one-line help). Commands are imported only when used, so that
# `barca --help` does not pay for the engine.
COMMANDS = {
    "get": ("barca.cli.get", "get_command", "Compute assets and what they need."),
    "run": ("barca.cli.get", "run_command", "Run tasks; their asset inputs come from cache."),
    "list": ("barca.cli.inspect", "list_command", "Every node, kind, freshness and inputs."),
    "status": ("barca.cli.inspect", "status_command", "Cache state of every node, and why."),
    "plan": ("barca.cli.inspect", "plan_command", "Execution phases as JSON."),
    "version": ("barca.cli.version", "version_command", "Print barca's version."),
    "history": ("barca.cli.history", "history_command", "Recent runs, or one run's steps."),
    "logs": ("barca.cli.logs", "logs_command", "What a run's steps printed."),
    "stats": ("barca.cli.stats", "stats_command", "Timings and re-execution rate of a node."),
    "sql": ("barca.cli.sql", "sql_command", "DuckDB SQL over the stored results."),
    "docs": ("barca.cli.docs", "docs_command", "The manual, by topic."),
    "gc": ("barca.cli.gc", "gc_command", "Remove results no current state needs."),
    "doctor": ("barca.cli.doctor", "doctor_command", "Check what barca needs to run here."),
    "pool": ("barca.cli.pool", "pool_command", "List or stop this user's warm pools."),
    "serve": ("barca.cli.serve", "serve_command", "Fire schedules and answer an HTTP API."),
    "queue": ("barca.cli.queue", "queue_command", "Runs in flight and waiting; pause, resume."),
    "state": ("barca.cli.state", "state_command", "The metadata database: backups, restore, "
              "reset."),
    "help": ("barca.cli.help", "help_command", "The help of a command (as COMMAND --help)."),
}
OPTIONS = [("-V, --version", "Show the version and exit."),
           ("-h, --help", "Show this message and exit.")]
