"""Pages of the pool that a command writes, copied by the next spares before it comes.

A forked child shares the pool's memory until it writes to it: its first write to each page
(a reference count, a free list, a cache entry) faults, and the kernel copies the page. A
one-key tick at 10,000 keys wrote some 3,000 of the pool's pages that way in its command, about
3-4 us each on the virtual machine barca's benchmarks run on, all on the tick's path. The pool
forks each command from a spare (`spares`), so the copies can be made before the request:

- a spare notes the pool's private writable mappings as it finds them (`remember_inherited`);
- once its command has answered, the child lists the pages of those mappings that are now its
  own (present and exclusively mapped, /proc/self/pagemap) and leaves the list beside the
  pool's lock file (`pool_registry.copies_path`; removed when the pool ends) (`leave`);
- the next spares, while they wait, have the kernel copy those pages now
  (`madvise(MADV_POPULATE_WRITE)`, Linux 5.14 and later: the content is not touched, only made
  the spare's own), at most as many as BARCA_SPARE_HEAP_MB allows, stopping when their request
  comes (`copy_ahead`).

Only private mappings are ever named: a shared one is never written or copied. A page the pool
no longer has mapped is skipped. Where the kernel cannot do it, nothing is copied.
"""

from __future__ import annotations

import array
import os
from typing import Any, Callable

PAGE = os.sysconf("SC_PAGE_SIZE")
_PRESENT, _EXCLUSIVE = 1 << 63, 1 << 56  # pagemap bits
_LARGEST = 1 << 30  # a mapping larger than this is a reservation, not the pool's objects
_MADV_POPULATE_WRITE = 23
_LOOK_EVERY = 64  # runs of pages between looks at the channel

_inherited: list[tuple[int, int]] = []  # the pool's private writable mappings, as found


def private_writable() -> list[tuple[int, int]]:
    """(start, end) of this process's private writable mappings, but the stack."""
    out = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if fields[1].startswith("rw") and fields[1].endswith("p") and \
                    fields[-1] != "[stack]":
                start, end = (int(x, 16) for x in fields[0].split("-"))
                if end - start <= _LARGEST:
                    out.append((start, end))
    return out


def remember_inherited() -> None:
    """In a spare, before it changes anything: the mappings it shares with the pool (none
    where /proc cannot say: then it lists nothing)."""
    try:
        _inherited[:] = private_writable()
    except (OSError, ValueError):
        _inherited.clear()


def written_pages() -> array.array:
    """Page numbers of the inherited mappings that are now this process's own."""
    pages = array.array("Q")
    fd = os.open("/proc/self/pagemap", os.O_RDONLY)
    try:
        for start, end in _inherited:
            entries = array.array("Q", os.pread(fd, (end - start) // PAGE * 8, start // PAGE * 8))
            first = start // PAGE
            pages.extend(first + i for i, entry in enumerate(entries)
                         if entry & _PRESENT and entry & _EXCLUSIVE)
    finally:
        os.close(fd)
    return pages


def leave(path: str) -> None:
    """For the pool's next spares: the pages this child (once a spare) wrote, replacing the
    last list; nothing for a child that was never a spare."""
    if not _inherited:
        return
    try:
        pages = written_pages()
        temporary = f"{path}.{os.getpid()}"
        with open(temporary, "wb") as fh:
            pages.tofile(fh)
        os.replace(temporary, path)
    except (OSError, ValueError):
        pass  # the next spares copy what the last list said, or nothing


def listed(path: str) -> int:
    """How many pages the list at `path` names."""
    try:
        return os.stat(path).st_size // 8
    except OSError:
        return 0


def copy_ahead(path: str, most: int, asked: Callable[[], bool]) -> int:
    """Make the listed pages (at most `most`) this process's own now; stop once `asked()`.
    How many it made so."""
    if most <= 0:
        return 0
    try:
        with open(path, "rb") as fh:
            pages = array.array("Q", fh.read(most * 8))
        mapped = private_writable()
    except (OSError, ValueError):
        return 0
    madvise = _madvise()
    done = 0
    for i, (first, count) in enumerate(_runs(pages, mapped)):
        if madvise is None or madvise(first * PAGE, count * PAGE, _MADV_POPULATE_WRITE) != 0:
            break  # a kernel before 5.14, or a page it will not copy: leave the rest
        done += count
        if i % _LOOK_EVERY == _LOOK_EVERY - 1 and asked():
            break
    return done


def _runs(pages: array.array, mapped: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(first page, count) of each run of consecutive listed pages inside one mapping."""
    runs: list[tuple[int, int]] = []
    ranges = iter(sorted(mapped))
    start, end = next(ranges, (0, 0))
    for page in sorted(set(pages)):
        address = page * PAGE
        while address >= end:
            start, end = next(ranges, (None, None))
            if start is None:
                return runs
        if address < start:
            continue
        if runs and runs[-1][0] + runs[-1][1] == page and address != start:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((page, 1))
    return runs


def _madvise() -> Any:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc.madvise
    except (ImportError, OSError, AttributeError):
        return None
