"""Where the routes' blocking work runs, so that one kind of request cannot starve another.

Reads of the metadata database (milliseconds: `/runs`, `/history`, `/stats`, ...) run on their
own threads; the reads computed in a child process (`/state`, `/list`, `/nodes`, the read-only
`/cli/` commands: seconds) on two threads of their own, at most COMMANDS_WAITING queued behind
them (503 past that); waiting for a run to be accepted or to end holds no thread at all
(`LiveRun.wait`). Before this, every kind shared asyncio's default pool (six threads on two
cores): seven slow views made `GET /runs` wait 18 s.
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from barca.server.http import ApiError

READ_THREADS = 8
COMMAND_THREADS = 2
COMMANDS_WAITING = 16

_reads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="barca-read")
_commands = ThreadPoolExecutor(COMMAND_THREADS, thread_name_prefix="barca-command")
_queued = 0  # commands asked for and not yet finished (changed on the event loop only)


async def read(fn: Callable, *args: Any) -> Any:
    """`fn(*args)` on a read thread: a database read or a small file."""
    return await asyncio.get_running_loop().run_in_executor(_reads, functools.partial(fn, *args))


async def command(fn: Callable, *args: Any) -> Any:
    """`fn(*args)` on a command thread: work that waits for a child process."""
    global _queued
    if _queued >= COMMAND_THREADS + COMMANDS_WAITING:
        raise ApiError(503, f"{_queued} commands are already running or waiting", "retry later",
                       kind="busy")
    _queued += 1
    try:
        return await asyncio.get_running_loop().run_in_executor(
            _commands, functools.partial(fn, *args))
    finally:
        _queued -= 1

