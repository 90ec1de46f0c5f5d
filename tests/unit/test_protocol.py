"""Framing between coordinator and workers, over a real pipe: messages come back whole and in
order however the bytes are split, including out-of-band bytes (a key source's columns); and
what the pool runs again of a lost worker's steps."""

from __future__ import annotations

import os
import threading

from barca.engine.local.frames import FrameBuffer, out_of_band, read_frame, write_frame
from barca.engine.protocol import (CallSpec, LogLine, StepOutcome, StepSpec, call_lost,
                                   unreported_part, unreported_steps)


CHUNKS = tuple(os.urandom(n) for n in (70_000, 1, 0, 300_000))


def _messages() -> list:
    chunks = CHUNKS
    return [
        LogLine("s1", "stdout", "hello\n"),
        StepOutcome("s2", "n", "", 0, "h", "success", 1, 0.5,
                    key_columns=(3, out_of_band(chunks), None)),
        LogLine("s3", "stderr", "x" * 100_000),
        StepOutcome("s4", "n", "", 0, "h", "success", 1, 0.5,
                    key_columns=(1, out_of_band((b'["k"]',)), out_of_band((b'["v"]',)))),
    ]


def _expected() -> list:
    out = []
    for message in _messages():
        if isinstance(message, StepOutcome):
            n, keys, values = message.key_columns
            message = message._replace(key_columns=(
                n, tuple(bytes(k.raw()) for k in keys),
                None if values is None else tuple(bytes(v.raw()) for v in values)))
        out.append(message)
    return out


def _written(messages: list) -> bytes:
    read_fd, write_fd = os.pipe()
    writer = threading.Thread(target=lambda: [write_frame(write_fd, m) for m in messages]
                              + [os.close(write_fd)])
    writer.start()
    data = b""
    while chunk := os.read(read_fd, 1 << 16):
        data += chunk
    writer.join()
    os.close(read_fd)
    return data


def test_frames_come_back_whole_however_the_bytes_are_split() -> None:
    data = _written(_messages())
    for step in (1, 7, 4096, 65_536, len(data)):
        buffer, got = FrameBuffer(), []
        for start in range(0, len(data), step):
            got += buffer.feed(data[start:start + step])
        assert got == _expected(), step
    # out-of-band bytes arrive as bytes, not views into a larger buffer
    assert all(type(c) is bytes for c in got[1].key_columns[1])


def test_a_blocking_reader_gets_the_same_messages() -> None:
    read_fd, write_fd = os.pipe()
    writer = threading.Thread(target=lambda: [write_frame(write_fd, m) for m in _messages()])
    writer.start()
    got = [read_frame(read_fd) for _ in _messages()]
    writer.join()
    os.close(read_fd)
    os.close(write_fd)
    assert got == _expected()


def test_a_worker_reports_at_once_a_step_that_took_nearly_all_its_timeout():
    """Outcomes are held up to FLUSH_SECONDS to travel (and pack) together, but the pool times
    a step from the outcome before it to its own: one near its timeout must go at once."""
    from types import SimpleNamespace

    from barca.engine.local.worker import FLUSH_SECONDS, _near_timeout

    def took(seconds: float) -> list:
        return [SimpleNamespace(elapsed_seconds=seconds)]

    step = SimpleNamespace(timeout_seconds=1.0)
    assert _near_timeout(step, took(1.0 - 2 * FLUSH_SECONDS))
    assert not _near_timeout(step, took(1.0 - 2 * FLUSH_SECONDS - 0.01))
    assert not _near_timeout(SimpleNamespace(timeout_seconds=0), took(100.0))  # none: 0
    assert not _near_timeout(SimpleNamespace(timeout_seconds=300.0), took(0.001))


def _step(key: str) -> StepSpec:
    return StepSpec(f"p.py:n[k={key}]", "p.py:n", f"k={key}", 0, "asset", "p.py", "n",
                    (("k", key),), (), f"n/{key}", "h", None, 0, 0.0, 0.0, False)


def _call(batch: str, keys: tuple[str, ...]) -> CallSpec:
    return CallSpec(f"p.py:n[batch={batch}]", "p.py:n", batch, "asset", "p.py", "n", ("k",),
                    keys, tuple(f"p.py:n[k={k}]" for k in keys), tuple(range(len(keys))),
                    ("h",) * len(keys), tuple(f"n/{k}" for k in keys), (), None, 0, 0.0, 0.0)


def test_steps_a_lost_worker_had_done_but_not_reported_run_again_but_for_reported_keys():
    """A worker lost while its done steps' outcomes waited for their uploads (the pool had
    them as `Computed`): a step runs again, a call over the keys not reported, and a call
    whose every key was reported only ends (its end had not arrived)."""
    step, partly, wholly = _step("a"), _call("b1", ("x", "y")), _call("b2", ("z",))
    reported = {"b1": {"p.py:n[k=x]"}, "b2": {"p.py:n[k=z]"}}
    again, ended = unreported_steps([step, partly, wholly], reported)
    assert again == [step, unreported_part(partly, {"p.py:n[k=x]"})]
    assert again[1].keys == ("y",) and again[1].batch == "b1"
    assert ended == [call_lost(wholly, 1, 1)]
    assert unreported_steps([partly], {}) == ([partly], [])  # no key reported: all again
