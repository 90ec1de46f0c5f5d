"""Writing buffers to a file descriptor whole: a pipe or a file may take fewer bytes per call.

One `writev` call sends many buffers without joining them first (a frame's header, pickle and
out-of-band columns; a keyed-json file's chunks), and the GIL is let go while it writes.
"""

from __future__ import annotations

import os
from typing import Sequence

_MAX_BUFFERS = 512  # per call, under the system's IOV_MAX (1024 on Linux)


def write_all(fd: int, buffers: Sequence[bytes | memoryview]) -> None:
    """Write every byte of `buffers`, in order."""
    parts = [memoryview(buffer) for buffer in buffers if len(buffer)]
    while parts:
        written = os.writev(fd, parts[:_MAX_BUFFERS])
        while written and written >= len(parts[0]):
            written -= len(parts[0])
            del parts[0]
        if written:
            parts[0] = parts[0][written:]
