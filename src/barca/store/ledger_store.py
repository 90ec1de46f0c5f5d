"""The shared store as a run against a server's ledger sees it: the same objects, with the
question "which of these results exist?" answered by the ledger (`lookup`, one request for
every node a planning phase decided) instead of the store's own index. The run still writes
that index as it records (the ledger records its results once the run is over:
engine.ledger_client): a machine without the server finds them too, and `barca gc --remote`,
which keeps only what some index names, never takes a result only the ledger knows. Everything else is the store underneath, which workers open by its
address as always.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

Wanted = Mapping[str, tuple[str, Sequence[tuple[str, str]]]]


class LedgerStore:
    def __init__(self, store: Any, lookup: Callable[[Wanted], dict]) -> None:
        self.inner, self.lookup = store, lookup

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def shared_results(self, wanted: Wanted) -> dict:
        return self.lookup(wanted)
