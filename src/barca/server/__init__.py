"""`barca serve`: the pipeline on its schedule, an HTTP API and a web UI, in one process.

Each run is a child process (forked from the project's warm pool) given a typed order and
running through the driver (`barca.cli.served_run`); its typed events come back on a pipe and
its result is what `barca get|run` prints. Of the engine this package imports the driver
alone, and nothing of the CLI but the parsers of the read-only commands it runs for clients
(tests/unit/test_architecture.py).
"""
