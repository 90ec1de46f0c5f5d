"""Framing of the messages between the local executor and its worker processes.

Each frame is a pickle of one message, after a header of big-endian lengths: the pickle's, the
number of out-of-band buffers and each buffer's; the buffers follow the pickle. A message
carries bytes out of band (`out_of_band`) when they are megabytes, a key source's packed
columns: they are written from where they are and not copied into the pickle first. Both ends
are processes of the same barca on the same machine, started by the coordinator itself.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any, NamedTuple

from barca.engine.protocol import CallFinished, CallSpec, StepOutcome, StepSpec
from barca.fd_writes import write_all

_HEADER = struct.Struct(">II")  # the pickle's length, the number of out-of-band buffers
_SIZE = struct.Struct(">I")


class Lease(NamedTuple):
    """Coordinator -> worker: run these steps in order, beside `workers` - 1 other workers."""

    steps: tuple[StepSpec | CallSpec, ...]
    workers: int = 1


class Warm(NamedTuple):
    """Coordinator -> worker: import these pipeline files now, before any step arrives."""

    files: tuple[str, ...]


class Shutdown(NamedTuple):
    """Coordinator -> worker: exit after the current step."""

    reason: str = "done"


class Outcomes(NamedTuple):
    """Worker -> coordinator: steps that finished, sent together to save round trips (a batch
    call's keys, then its `CallFinished`)."""

    items: tuple[StepOutcome | CallFinished, ...]


class Computed(NamedTuple):
    """Worker -> coordinator: these leased steps are done, but their `Outcomes` wait for
    their results' uploads (engine.local.uploads). The worker goes on meanwhile, so the pool
    times its next step from here and may lease it more; a worker lost before the outcomes
    arrive has these steps run again, as it has the steps it had not begun."""

    step_ids: tuple[str, ...]


def ends_step(outcome: StepOutcome | CallFinished) -> bool:
    """Whether an outcome ends a leased step: a step's own, or a call's end (not a key the
    call wrote, reported as it is written)."""
    return isinstance(outcome, CallFinished) or outcome.batch is None


class StoreFailed(NamedTuple):
    """Worker -> coordinator: the results of steps it finished could not be written to the
    artifact store (an InfraError's message and remediation): those steps are never reported,
    and the run must stop with this error rather than start the worker again."""

    error: str
    remediation: str | None


class Imported(NamedTuple):
    """Worker -> coordinator: top-level libraries the worker's steps imported (not project
    code), so the warm pool can have them loaded before the next run."""

    modules: tuple[str, ...]


def out_of_band(chunks: tuple[bytes | None, ...]) -> tuple[Any, ...]:
    """Bytes sent after the message's pickle rather than inside it; they arrive as bytes."""
    return tuple(None if chunk is None else pickle.PickleBuffer(chunk) for chunk in chunks)


def _frame(message: Any) -> list[Any]:
    buffers: list[pickle.PickleBuffer] = []
    body = pickle.dumps(message, protocol=5, buffer_callback=buffers.append)
    raws = [buffer.raw() for buffer in buffers]
    header = _HEADER.pack(len(body), len(raws)) + b"".join(_SIZE.pack(r.nbytes) for r in raws)
    return [header, body, *raws]


def write_frame(fd: int, message: Any) -> None:
    write_all(fd, _frame(message))


def read_frame(fd: int) -> Any:
    """Blocking read of one message; EOFError when the other side closed."""
    size, count = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    sizes = [_SIZE.unpack(_read_exact(fd, _SIZE.size))[0] for _ in range(count)]
    body = _read_exact(fd, size)
    return pickle.loads(body, buffers=[_read_exact(fd, n) for n in sizes])


def _read_exact(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("peer closed")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class FrameBuffer:
    """Accumulates bytes read without blocking and yields whole messages.

    Reads are kept as they arrive and joined once a whole message is in: a message of
    megabytes is copied once, not once per read."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0  # bytes in _parts
        self._wanted = _HEADER.size  # bytes needed before the next message can be complete

    def feed(self, data: bytes) -> list[Any]:
        self._parts.append(data)
        self._size += len(data)
        if self._size < self._wanted:
            return []
        buf = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        out, start = [], 0
        while True:
            self._wanted = _frame_length(buf, start)
            if len(buf) - start < self._wanted:
                break
            out.append(_decode(buf, start))
            start += self._wanted
        rest = buf[start:]
        self._parts = [rest] if rest else []
        self._size = len(rest)
        return out


def _frame_length(buf: bytes, start: int) -> int:
    """The length of the frame at `start`, or as much of it as must be read to know it."""
    if len(buf) - start < _HEADER.size:
        return _HEADER.size
    size, count = _HEADER.unpack_from(buf, start)
    sizes_end = start + _HEADER.size + count * _SIZE.size
    if len(buf) < sizes_end:
        return sizes_end - start
    return sizes_end - start + size + sum(_buffer_sizes(buf, start, count))


def _buffer_sizes(buf: bytes, start: int, count: int) -> list[int]:
    offset = start + _HEADER.size
    return [_SIZE.unpack_from(buf, offset + i * _SIZE.size)[0] for i in range(count)]


def _decode(buf: bytes, start: int) -> Any:
    size, count = _HEADER.unpack_from(buf, start)
    at = start + _HEADER.size + count * _SIZE.size
    body = memoryview(buf)[at:at + size]
    at += size
    buffers = []
    for n in _buffer_sizes(buf, start, count):
        buffers.append(buf[at:at + n])
        at += n
    return pickle.loads(body, buffers=buffers)
