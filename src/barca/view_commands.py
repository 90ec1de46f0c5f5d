"""The read-only commands a server runs for `--server` clients (`GET /cli/{command}`), by
name: one list, read by the server (which answers 404 for any other name before it starts
anything) and by the child that parses and runs them (`barca.cli.served_views`), so that
the two cannot disagree."""

VIEW_COMMANDS = ("status", "list", "history", "logs", "stats", "doctor")
