"""The worker side: what runs a step. Imported by worker processes (`engine/local/worker.py`),
the in-process executor and any executor on another machine; it imports nothing of the
coordinator side (`tests/unit/test_architecture.py`), only the messages both share
(`engine/protocol.py`)."""
