"""A node's result names as a remote store sees them: the local copies first, the store's
listing only when a name is not among them, so that a run whose results are all here asks the
store nothing (store.remote_store `names`)."""

from __future__ import annotations

from typing import Callable, Iterator


class ListedNames:
    """`in` and iteration over the local names, then the listed ones."""

    def __init__(self, local: frozenset[str], listed: Callable[[], dict[str, str]]) -> None:
        self.local, self.listed = local, listed
        self.remote: dict[str, str] | None = None

    def __contains__(self, name: object) -> bool:
        if name in self.local:
            return True
        if self.remote is None:
            self.remote = self.listed()
        return name in self.remote

    def __iter__(self) -> Iterator[str]:
        if self.remote is None:
            self.remote = self.listed()
        return iter(self.local | frozenset(self.remote))
