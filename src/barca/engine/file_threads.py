"""The files of a batch call's keys, read or written on two threads, in the keys' order.

Opening, writing and naming a small file is kernel work done with the GIL let go: on two cores
two threads wrote 30,000 result files in 2.0-2.2 s where one took 2.7-2.8 s. Results come back
in the items' order, so what a call reports, and the order history lists its keys in, does not
depend on which thread was first.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, Sequence, TypeVar

T = TypeVar("T")
R = TypeVar("R")

THREADS = min(2, os.cpu_count() or 1)  # more contend on the directory the files share
CHUNK = 256  # items per task: few enough tasks that handing them out costs nothing


def map_in_order(fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
    """fn over items, yielded in order; a few items, or one core, run here."""
    if THREADS < 2 or len(items) < 2 * CHUNK:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(THREADS, thread_name_prefix="barca-files") as pool:
        futures = [pool.submit(_apply, fn, items[start:start + CHUNK])
                   for start in range(0, len(items), CHUNK)]
        try:
            for future in futures:
                yield from future.result()
        finally:  # stopped early (an error): what has not started never does
            for future in futures:
                future.cancel()


def _apply(fn: Callable[[T], R], chunk: Sequence[T]) -> list[R]:
    return [fn(item) for item in chunk]
