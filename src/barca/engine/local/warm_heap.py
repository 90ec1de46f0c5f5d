"""Memory a spare makes ready while it waits, so that the run it serves does not wait for it.

A process forked from the warm pool gets each page of new memory from the kernel the first time
it touches it, a fault each: about 3 us a page on the 2-core virtual machine barca's benchmarks
run on (well under 1 us on most hardware). A one-key tick at 200,000 keys touches some 120 MB
of new memory in its sensor's worker and 50 MB in its command, much of it Python objects (the
sensor's rows and dict, the keys' packing), and waited about 30 ms for those faults alone.
Python's allocator for small objects (pymalloc) takes memory in 1 MiB arenas and gives an arena
back only once nothing in it is used. So a spare, while it waits for its request, fills arenas
with objects and keeps two of them in each: the rest of each arena is free for the run's
objects and already touched, its own (not a page it shares with the pool).

How much: half the memory the pool's recent children touched afresh beyond what they had
prepared as spares (their page faults, as the pool reaps them), at most BARCA_SPARE_HEAP_MB
(64 by default; 0 turns this off), nothing below a few MB. A spare looks at its channel after
each MB and stops as soon as its request comes. The memory shows in `barca pool` (MEMORY
counts the spares' own) and goes with the spare.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Callable

MB = 1 << 20
BLOCK = 479  # bytes(479) takes 512 bytes of pymalloc, its largest size class
PER_MB = MB // 512
PIN_EVERY = 1024  # blocks kept: two per 1 MiB arena (1,984 blocks in one)
LEAST = 4 * MB  # a budget below this is not worth a spare's time
RECENT = 8  # children whose faults the budget looks at
PAGE = os.sysconf("SC_PAGE_SIZE")

_pinned: list[bytes] = []  # what keeps the prepared arenas this process's


class HeapBudget:
    """Learnt by the pool from the children it reaps: how much a spare prepares."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.touched: deque[int] = deque(maxlen=RECENT)

    def learn(self, faults: int, prepared: int) -> None:
        """A child ended having taken `faults` pages afresh (`ru_minflt`), `prepared` bytes
        of them as a spare."""
        self.touched.append(max(0, faults * PAGE - prepared))

    def size(self) -> int:
        budget = min(self.most, max(self.touched, default=0) // 2)
        return budget if budget >= LEAST else 0


def prepare(size: int, asked: Callable[[], bool]) -> None:
    """Make about `size` bytes of pymalloc arenas this process's, touched; stop early once
    `asked()` (a request came)."""
    blocks: list[bytes] = []
    for _ in range(size // MB):
        blocks += [bytes(BLOCK) for _ in range(PER_MB)]
        if asked():
            break
    _pinned.extend(blocks[::PIN_EVERY])
