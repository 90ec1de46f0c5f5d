"""`barca serve`: the pipeline on its schedule, with an HTTP API (see `barca docs serve`)."""

from __future__ import annotations

import click

from barca.cli.load import split_positionals

HELP = """Serve the pipeline in FILES (default: the whole project): fire its schedules and
answer an HTTP API, until Ctrl-C or SIGTERM.

\b
Every `Schedule(cron)` node fires on its cron: a scheduled sensor's tick runs the
sensor and the keys of its readers whose version changed. Runs are the CLI's own
`barca get`/`barca run`, forked from the project's warm pool.
\b
Examples:
  barca serve pipeline.py
  barca serve pipeline.py --port 0 --timezone utc
  barca serve pipeline.py --watch
  barca serve pipeline.py --max-runs 2 --capacity 8 --drain-timeout 120
  BARCA_SERVE_TOKEN=$(cat ~/.barca-token) barca serve --host 0.0.0.0
  barca serve --read-only --allow-host barca.internal
  curl -X POST localhost:8274/runs -H 'Content-Type: application/json' \\
       -d '{"targets": ["summary"]}'
\b
Only this machine can reach it unless --host says otherwise, and then a token is
required; pages of other sites cannot start or cancel runs (`barca docs serve`,
"Security").
"""


@click.command("serve", help=HELP)
@click.argument("args", nargs=-1, metavar="[FILES]...")
@click.option("-p", "--port", type=int, default=8274, show_default=True,
              help="TCP port (0: any free port, printed at start).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="IP address to listen on; beyond loopback a token is required.")
@click.option("--token", metavar="TOKEN", help="Every request but GET /health needs "
              "`Authorization: Bearer TOKEN` (other users can read a command line: prefer "
              "BARCA_SERVE_TOKEN or [serve] token in barca.toml).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer requests addressed to this host name (a proxy's or DNS name); "
              "repeatable.")
@click.option("--insecure-no-token", is_flag=True, help="Listen beyond loopback without a "
              "token (only behind an authenticating proxy).")
@click.option("--read-only", is_flag=True, help="Refuse to start or cancel runs (403), fire "
              "nothing, only read the database.")
@click.option("--watch", is_flag=True, help="Reload the pipeline when a source file changes "
              "(a fixed load error clears, an edited schedule takes effect).")
@click.option("--no-schedule", is_flag=True, help="API only: fire no schedules.")
@click.option("--timezone", default="local", show_default=True,
              help="Zone schedules fire in: local, utc or an IANA name (Europe/Paris).")
@click.option("--env", "env_name", metavar="NAME", help="Serve the cache and history under "
              ".barca/envs/NAME (or set BARCA_ENV).")
@click.option("--run-timeout", type=float, default=600.0, show_default=True, metavar="SECONDS",
              help="Cancel a run (reported failed: timed out) after this many seconds per "
              "target; 0: no limit.")
@click.option("--max-runs", type=int, metavar="N", help="Runs at once; the others wait in "
              "the queue, in order (default: one per core).")
@click.option("--capacity", type=int, metavar="N", help="Units of weight= the steps of all "
              "runs may hold at once (default: no server-wide limit; each run keeps its own).")
@click.option("--drain-timeout", type=float, default=30.0, show_default=True,
              metavar="SECONDS", help="At SIGTERM, how long running runs get to finish "
              "before they are cancelled (waiting runs stay queued for the next start); 0: "
              "cancel them at once.")
def serve_command(args, port, host, token, allow_hosts, insecure_no_token, read_only, watch,
                  no_schedule, timezone, env_name, run_timeout, max_runs, capacity,
                  drain_timeout) -> None:
    from barca.server.main import serve
    from barca.server.options import ServeOptions

    _, paths = split_positionals(args, takes_target=False)
    code = serve(ServeOptions(tuple(paths), host, port, read_only, not no_schedule, watch, timezone,
                       env_name, run_timeout, token, tuple(allow_hosts), insecure_no_token,
                       max_runs, capacity, drain_timeout))
    if code:  # a second signal cut the drain short
        import sys

        sys.exit(code)
