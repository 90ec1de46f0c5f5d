"""Children the fork server forks ahead of requests (see `fork_server`): forking a process of the
pool's size takes it 3-4 ms, twice on a tick's path (the command, then its first worker).

Once the pool has been quiet a while, with every import done, it forks COUNT children
(`forked_child.wait_as_spare`): each lets go of the pool's things at once, as a child forked
for a request does, and waits on its channel for one request, which the pool then hands it with
the request's descriptors instead of forking. Meanwhile it makes its own the pool's pages that
the last command wrote (`page_copies`) and makes new memory ready for the run it will serve, as
much as the pool's recent children took afresh (`warm_heap`). A spare is what a
child forked at that moment would be; an import in the pool closes the spares' channels (they
exit on seeing that) and new ones are forked when it is quiet again. The pool's end of each
channel is in its selector, so every later child lets go of it too, and the pool sees it close
when a spare dies.
"""

from __future__ import annotations

import os
import selectors
import socket
from typing import Callable, NamedTuple

from barca.engine.local import forked_child, page_copies, pool_registry, settings, warm_heap
from barca.engine.local.pool_messages import ForkWorker, RunCommand, send
from barca.errors import UsageError

COUNT = 2  # a command and its first worker
AFTER_SECONDS = 1.0  # without a request before spares are forked


class Spare(NamedTuple):
    """Selector data of the pool's end of a spare's channel."""

    pid: int


class Spares:
    def __init__(self, selector: selectors.BaseSelector, watch: Callable[[int], int]) -> None:
        self.selector, self.watch = selector, watch  # `watch`: reap the child when it exits
        self.ready: list[tuple[int, socket.socket]] = []  # (pid, the pool's end)
        # what each prepares, learnt from the children (`ended`), within the newest run's bound
        self.heap = warm_heap.HeapBudget(settings.DEFAULT_SPARE_HEAP)
        self.prepared: dict[int, int] = {}  # pid -> what a spare was told to prepare

    def fork_when_quiet(self, quiet: float, inherited: Callable[[], forked_child.Inherited],
                        run_argv: forked_child.RunArgv | None) -> float | None:
        """Fork the spares missing once the pool has been `quiet` AFTER_SECONDS; else the
        seconds until then (None when none is missing)."""
        if len(self.ready) >= COUNT:
            return None
        if quiet < AFTER_SECONDS:
            return AFTER_SECONDS - quiet
        heap, found = self.heap.size(), inherited()
        # the pages the last command wrote, within the same bound (none when it is 0)
        copies = min(page_copies.listed(str(pool_registry.copies_path(found.lock.name))),
                     self.heap.most // page_copies.PAGE)
        while len(self.ready) < COUNT:
            ours, theirs = socket.socketpair()
            pid = os.fork()
            if not pid:
                ours.close()
                forked_child.wait_as_spare(found, theirs, run_argv, heap, copies)
            theirs.close()
            self.prepared[pid] = heap + copies * page_copies.PAGE  # not faults of its run
            self.selector.register(ours, selectors.EVENT_READ, Spare(pid))
            self.ready.append((self.watch(pid), ours))
        return None

    def drop(self) -> None:
        """Let every spare go: each sees its channel end, and exits."""
        while self.ready:
            self._let_go(0)

    def heed(self, env: dict[str, str]) -> None:
        """A request's environment: its BARCA_SPARE_HEAP_MB bounds what spares prepare."""
        try:
            self.heap.most = settings.spare_heap_bytes(env)
        except UsageError:
            pass  # the run reports it

    def ended(self, pid: int, faults: int) -> None:
        """A child of the pool ended (reaped) having taken `faults` pages afresh."""
        self.heap.learn(faults, self.prepared.pop(pid, 0))

    def died(self, key: selectors.SelectorKey) -> None:
        """A spare's channel closed before it was handed a request."""
        self._let_go(self.ready.index((key.data.pid, key.fileobj)))

    def hand(self, request: ForkWorker | RunCommand, fds: list[int]) -> int | None:
        """Hand the request (with `fds`) to a spare: its pid; None when there is none."""
        while self.ready:
            pid, channel = self.ready[0]
            try:
                send(channel, request, fds)
                return pid
            except OSError:
                continue  # it died
            finally:
                self._let_go(0)
        return None

    def _let_go(self, index: int) -> None:
        _, channel = self.ready.pop(index)
        self.selector.unregister(channel)
        channel.close()
