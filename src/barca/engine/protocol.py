"""Typed messages between the coordinator and its workers, and their framing.

Each frame is a 4-byte big-endian length and a pickle of one message. Messages are typed
NamedTuples: immutable, named fields, and as cheap to pickle as plain tuples, which matters at
thousands of steps a second. Failures
cross the boundary as data (`StepOutcome` with the error's type name, message and traceback
text), never as live exception objects.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import Any, NamedTuple

_HEADER = struct.Struct(">I")


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
    key_columns: tuple | None = None  # a key source's (count, keys JSON, values JSON or None)


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


def encode(message: Any) -> bytes:
    body = pickle.dumps(message, protocol=5)
    return _HEADER.pack(len(body)) + body


def write_frame(fd: int, message: Any) -> None:
    body = pickle.dumps(message, protocol=5)
    header = _HEADER.pack(len(body))
    if len(body) < 1 << 16:
        _write_all(fd, header + body)
    else:  # a key source's columns: megabytes, not worth a copy to save one write
        _write_all(fd, header)
        _write_all(fd, body)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_frame(fd: int) -> Any:
    """Blocking read of one message; EOFError when the other side closed."""
    header = _read_exact(fd, _HEADER.size)
    (size,) = _HEADER.unpack(header)
    return pickle.loads(_read_exact(fd, size))


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
        view = memoryview(buf)
        out, start = [], 0
        while len(buf) - start >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buf, start)
            end = start + _HEADER.size + size
            if len(buf) < end:
                break
            out.append(pickle.loads(view[start + _HEADER.size:end]))
            start = end
        rest = buf[start:]
        self._parts = [rest] if rest else []
        self._size = len(rest)
        self._wanted = _HEADER.size + (_HEADER.unpack_from(rest)[0]
                                       if len(rest) >= _HEADER.size else 0)
        return out
