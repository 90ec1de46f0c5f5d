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

Larger blocks (a dict's table, a list of 200,000 items, a bytes object read from a pipe) come
from the C library's malloc, which takes each from fresh pages of its own (glibc maps a block
of 128 KB or more for itself, unless a freed one has raised that threshold). Under glibc, a
quarter of what a spare prepares (at most 16 MB) is that heap: it frees one 16 MB block, which
raises glibc's thresholds as a process's first large free would (blocks up to 16 MB then come
from the heap, and up to 32 MB of freed heap is kept), then touches blocks of the heap and
frees them, so that the run's large blocks find pages already its own: the sensor's dict at
200,000 keys then takes no page afresh instead of 3,600.

How much: half the memory the pool's recent children touched afresh beyond what they had
prepared as spares (their page faults, as the pool reaps them), at most BARCA_SPARE_HEAP_MB
(64 by default; 0 turns this off), nothing below a few MB. A spare looks at its channel after
each MB and stops as soon as its request comes. The memory shows in `barca pool` (MEMORY
counts the spares' own) and goes with the spare.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Any, Callable

MB = 1 << 20
BLOCK = 479  # bytes(479) takes 512 bytes of pymalloc, its largest size class
PER_MB = MB // 512
PIN_EVERY = 1024  # blocks kept: two per 1 MiB arena (1,984 blocks in one)
LEAST = 4 * MB  # a budget below this is not worth a spare's time
RECENT = 8  # children whose faults the budget looks at
PAGE = os.sysconf("SC_PAGE_SIZE")
C_HEAP_MOST = 16 * MB  # glibc keeps up to twice its raised mmap threshold of freed heap

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
    """Make about `size` bytes this process's, touched: pymalloc arenas, and a quarter of it
    (at most C_HEAP_MOST) of the C heap under glibc; stop early once `asked()` (a request
    came)."""
    c_heap = min(size // 4, C_HEAP_MOST)
    libc = _glibc() if c_heap >= MB else None
    if libc is None:
        c_heap = 0
    blocks: list[bytes] = []
    for _ in range((size - c_heap) // MB):
        blocks += [bytes(BLOCK) for _ in range(PER_MB)]
        if asked():
            c_heap = 0
            break
    _pinned.extend(blocks[::PIN_EVERY])
    if c_heap:
        _prepare_c_heap(libc, c_heap, asked)


def _glibc() -> Any:
    """This process's C library (ctypes), if it is glibc (whose thresholds `_prepare_c_heap`
    relies on); None otherwise. ctypes is imported here, not at the pool's start."""
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc's alone
    except (OSError, AttributeError):
        return None
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    return libc


def _prepare_c_heap(libc: Any, size: int, asked: Callable[[], bool]) -> None:
    """Touch about `size` bytes of glibc's heap and free them, after one freed block of
    C_HEAP_MOST has raised the thresholds, so that malloc keeps them for the blocks to come."""
    import ctypes

    libc.free(libc.malloc(C_HEAP_MOST))
    held = []
    try:
        for _ in range(size // MB):
            block = libc.malloc(MB)
            if not block:
                break
            held.append(block)
            ctypes.memset(block, 0, MB)
            if asked():
                break
    finally:
        for block in held:
            libc.free(block)
