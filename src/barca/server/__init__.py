"""`barca serve`: the pipeline on its schedule, an HTTP API and a web UI, in one process.

Runs are whole CLI commands in child processes (forked from the project's warm pool), so what
the server answers is what the CLI prints; this package only starts, follows and reads them.
Of the engine it imports the driver alone (tests/unit/test_architecture.py).
"""
