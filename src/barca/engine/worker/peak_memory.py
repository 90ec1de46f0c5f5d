"""A step's peak memory (`max_rss_bytes`): the most resident memory of the process that ran
it, while it ran, not since the process started.

A worker runs many steps, and the kernel's usual figure (`getrusage`'s `ru_maxrss`) only ever
grows, so after one heavy step every later step would report that step's peak. On Linux the
step runner therefore resets the process's high-water mark before each step or batch call
(writing "5" to /proc/self/clear_refs sets `VmHWM` to the present RSS) and reads the mark after
it. The mark is read with `getrusage` for the calling thread only (its `ru_maxrss` is the
process's all the same, and it does not sum the times of every thread, a dozen once DuckDB has
run: 1-3 us), whose `ru_maxrss` is the larger of the same mark and a floor the kernel sets when
a process is exec'd: the peak of the memory the process
replaced, which for a worker started by `subprocess` is its coordinator's. A forked process
(the warm pool's workers) has no floor. Where a floor may hide the step's own peak (a figure
not above the floor's bound, `_floor`), the mark is read from /proc/self/status instead
(5 us), so the figure is VmHWM either way. What the process held when the step began
(Python, its imports, the worker's own state) is part of the figure, as it is part of the
memory the step needed.

A `parallel()` branch runs in a forked process of its own; its peak (from `wait4`, which
counts the pages it shares with the worker too) is noted here, and the step's figure is the
larger of its own process's and its largest branch's. Branches that ran at once are not added
up, so the figure is the largest single process of the step, not the machine's total.

Where /proc cannot be written or read (macOS, a sandbox), the figure falls back to the
process's peak since it started, which is the step's own peak only for the first step of a
process.
"""

from __future__ import annotations

import os
import resource
import sys

_clearable = True  # until a reset fails: then every figure is the process's peak
# (pid, fd) of /proc/self/clear_refs, kept open (a write is a reset) by the process it names
_clear_refs: tuple[int, int] | None = None
_cleared = False  # the last reset worked: VmHWM is this step's
_branches = 0  # the largest parallel() branch since the last reset, in bytes
# a bound on the floor exec left in ru_maxrss, in bytes: a figure above it is the mark itself;
# None until the first reset measures it
_floor: int | None = None

# ru_maxrss is in kilobytes on Linux and in bytes on macOS
_RUSAGE_UNIT = 1 if sys.platform == "darwin" else 1024


def forked() -> None:
    """This process was forked, not exec'd (a warm pool's worker): ru_maxrss has no floor."""
    global _floor
    _floor = 0


def reset() -> None:
    """Start a step's measure: the high-water mark is set to the memory held now."""
    global _clearable, _cleared, _branches, _floor, _clear_refs
    _branches = 0
    _cleared = False
    if not _clearable:
        return
    try:
        if _clear_refs is None or _clear_refs[0] != os.getpid():  # a forked child's own
            _clear_refs = (os.getpid(), os.open("/proc/self/clear_refs",
                                                os.O_WRONLY | os.O_CLOEXEC))
        os.write(_clear_refs[1], b"5")
    except OSError:
        _clearable = False  # not Linux, or not allowed: the same next time
        return
    _cleared = True
    if _floor is None:  # ru_maxrss is max(floor, mark) >= floor, the mark being the least now
        _floor = _rusage_peak()


def peak() -> int:
    """The peak resident bytes since the last `reset` (its branches' included), or the
    process's peak since it started where the high-water mark could not be reset."""
    own = _rusage_peak()
    if _cleared and own <= (_floor or 0):  # may be the floor: the mark itself, from /proc
        own = _hwm() or own
    return max(own, _branches)


_WHO = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)  # Linux has it, macOS not


def _rusage_peak() -> int:
    return resource.getrusage(_WHO).ru_maxrss * _RUSAGE_UNIT


def note_branch(usage: resource.struct_rusage) -> None:
    """A `parallel()` branch ended: its process's peak (from `os.wait4`) counts for the step."""
    global _branches
    _branches = max(_branches, usage.ru_maxrss * _RUSAGE_UNIT)


def _hwm() -> int | None:
    """VmHWM of /proc/self/status in bytes; None if it cannot be read."""
    try:
        fd = os.open("/proc/self/status", os.O_RDONLY)
        try:
            text = os.read(fd, 1 << 14)
        finally:
            os.close(fd)
        start = text.index(b"VmHWM:") + 6
        return int(text[start:text.index(b"kB", start)]) * 1024
    except (OSError, ValueError):
        return None
