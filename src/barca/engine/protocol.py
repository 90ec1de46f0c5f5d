"""Typed messages between the coordinator and its workers, and their framing.

Each frame is a pickle of one message, after a header of big-endian lengths: the pickle's, the
number of out-of-band buffers and each buffer's; the buffers follow the pickle. A message
carries bytes out of band (`out_of_band`) when they are megabytes, a key source's packed
columns: they are written from where they are and not copied into the pickle first. Messages
are typed NamedTuples: immutable, named fields, and as cheap to pickle as plain tuples, which
matters at thousands of steps a second. Failures cross the boundary as data (`StepOutcome`
with the error's type name, message and traceback text), never as live exception objects.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any, NamedTuple

from barca.fdio import write_all

_HEADER = struct.Struct(">II")  # the pickle's length, the number of out-of-band buffers
_SIZE = struct.Struct(">I")


class InputRef(NamedTuple):
    """How a step receives one parameter.

    kind: "artifact"  one file, read by the parameter's annotation
          "artifacts" several files (collect), read into a list in key order
          "inline"    a value carried in the message (a keyed source's value for this key)
          "none"      an ordering-only input: the parameter receives None
    """

    param: str
    kind: str
    paths: tuple[str, ...] = ()
    formats: tuple[str, ...] = ()
    value: Any = None
    annotation: str | None = None


Known = tuple[tuple[bytes, ...], tuple[bytes, ...]]  # digests of stored keys / values chunks


class PackedColumns(NamedTuple):
    """A key source's keys and values packed in chunks (barca.columns), each chunk the
    coordinator said it has left out (None), with every chunk's digest."""

    count: int
    keys: tuple[Any, ...]
    values: tuple[Any, ...] | None  # None for a list source
    key_digests: tuple[bytes, ...]
    value_digests: tuple[bytes, ...]


class StepSpec(NamedTuple):
    step_id: str  # "pipeline.py:scored[retailer=r7]"
    node_id: str
    key: str  # "" when unpartitioned
    index: int  # the key's position in the node's plan
    kind: str  # "asset" | "sensor" | "task"
    file: str  # root-relative path of the pipeline file
    function: str
    key_args: tuple[tuple[str, str], ...]  # (dimension parameter, value)
    inputs: tuple[InputRef, ...]
    artifact_dir: str  # root-relative directory the artifact goes into
    run_hash: str
    serializer: str | None
    retries: int
    retry_backoff: float
    timeout_seconds: float
    key_source: bool  # the value must be a list or a {key: value} dict of JSON values
    known_chunks: Known = ((), ())  # a key source's: what the coordinator has stored


class StepOutcome(NamedTuple):
    step_id: str
    node_id: str
    key: str
    index: int
    run_hash: str
    status: str  # "success" | "failed"
    attempts: int
    elapsed_seconds: float
    artifact_path: str | None = None
    format: str | None = None
    size_bytes: int | None = None
    output_hash: str | None = None
    max_rss_bytes: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    traceback: str | None = None
    key_columns: PackedColumns | None = None


class Lease(NamedTuple):
    """Coordinator -> worker: run these steps in order."""

    steps: tuple[StepSpec, ...]


class Warm(NamedTuple):
    """Coordinator -> worker: import these pipeline files now, before any step arrives."""

    files: tuple[str, ...]


class Shutdown(NamedTuple):
    """Coordinator -> worker: exit after the current step."""

    reason: str = "done"


class Outcomes(NamedTuple):
    """Worker -> coordinator: steps that finished, sent together to save round trips."""

    items: tuple[StepOutcome, ...]


class StepStarted(NamedTuple):
    """Worker -> coordinator: a retry attempt began (its timeout starts again)."""

    step_id: str
    attempt: int


class Imported(NamedTuple):
    """Worker -> coordinator: top-level libraries the worker's steps imported (not project
    code), so the warm pool can have them loaded before the next run."""

    modules: tuple[str, ...]


class LogLine(NamedTuple):
    step_id: str
    stream: str  # "stdout" | "stderr"
    text: str


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
