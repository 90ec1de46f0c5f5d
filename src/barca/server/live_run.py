"""One run this server knows of, as it goes: its status, its events, its process and where
its result is spooled; and how a client waits for it without holding a thread."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from barca.server.events import EventLog
from barca.server.run_request import RunRequest
from barca.views.failure_groups import error_group
from barca.views.server_runs import run_status_word

WAKE_SECONDS = 0.5  # a client waiting for a run looks again at least this often
INLINE_BYTES = 256 * 1024  # an output up to this size travels in the run's last event


@dataclass(eq=False)
class LiveRun:
    run_id: str
    request: RunRequest
    triggered_by: str
    events: EventLog
    started_at: float = field(default_factory=time.time)
    status: str = "pending"  # pending | running | complete | failed | cancelled
    finished_at: float | None = None
    exit_code: int | None = None
    stdout_path: Path | None = None  # what the command printed on stdout (spooled)
    error: dict | None = None  # the CLI's error envelope, when it printed one
    process: Any = None  # its CommandProcess, once started
    accepted: bool = False  # the child checked the request and recorded the run
    queued: bool = False  # kept in the database's queue (answered 202 before it ran)
    timed_out: float | None = None  # the time limit it was cancelled at
    stop_asked: bool = False  # cancelled (DELETE, or its time limit): asked to stop
    settled: threading.Event = field(default_factory=threading.Event)  # accepted or ended
    ended: threading.Event = field(default_factory=threading.Event)
    timer: threading.Timer | None = None  # its time limit
    time_limit: float | None = None  # seconds it may run (0: no limit); None: the server's
    limit_by: str | None = None  # who set `time_limit`, said when it times out
    failed_steps: list = field(default_factory=list)  # the first failed step's event
    failed_count: int = 0  # its steps that failed
    failed_nodes: set = field(default_factory=set)  # the nodes of those steps
    summary: dict | None = None  # its `run_summary` event: steps run, total, time

    @property
    def live(self) -> bool:
        return self.status in ("pending", "running")

    async def wait(self, flag: threading.Event, timeout: float | None = None) -> None:
        """Wait on the event loop until `flag` (`settled` or `ended`) is set, holding no
        thread: a hundred clients waiting for queued dry runs must not take every thread
        the other routes read with. The run's events wake it (and a poll, should a wake-up
        come between a look at the flag and the wait)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not flag.is_set():
            changed = self.events.changed
            if flag.is_set():
                return
            left = WAKE_SECONDS if deadline is None else min(WAKE_SECONDS,
                                                             deadline - time.monotonic())
            if left <= 0:
                return
            try:
                await asyncio.wait_for(changed.wait(), left)
            except asyncio.TimeoutError:
                pass

    def on_event(self, event: dict) -> None:
        """One event of the run's (`barca.views.run_events`; `error`: the envelope of the
        error it ended with, kept as the run's error). A failed step's gets the group its
        error falls in, as the run's page groups them."""
        if event["type"] == "error":
            self.error = event["error"]
            return
        if event["type"] == "step_finished" and not event["ok"]:
            event["error_group"] = error_group(event.get("error"), event["step_id"])
            self.failed_count += 1
            self.failed_nodes.add(event["node_id"])
            if not self.failed_steps:
                self.failed_steps.append(event)
        elif event["type"] == "run_summary":
            self.summary = event
        if event["type"] == "run_accepted":
            self.status, self.accepted = "running", True
            self.settled.set()  # before the event: whoever it wakes finds the run settled
        self.events.append(event)

    def end_unstarted(self, status: str, error: str) -> None:
        """It ends without having started (cancelled, or it could not start)."""
        self.status = status
        self.exit_code = 130 if status == "cancelled" else 3
        self.error = {"error": error, "kind": status}
        self.finish()

    def finish(self) -> None:
        """It has ended, as `status`, `exit_code` and `error` say: its last event, then every
        waiter woken."""
        self.finished_at = time.time()
        self.events.append({"type": "run_finished", "run_id": self.run_id,
                            "ok": self.exit_code == 0, "status": self.status,
                            "run_status": run_status_word(self.status),
                            "exit_code": self.exit_code, "outcome": self.outcome(),
                            "error": self.error, "stdout": self.stdout(INLINE_BYTES),
                            "stdout_bytes": self.stdout_size()})
        self.ended.set()  # before the log closes: whoever it wakes finds the run ended
        self.settled.set()
        self.events.close()
        if self.timer is not None:
            self.timer.cancel()

    def signal(self, signum: int) -> None:
        if self.process is not None:
            self.process.signal(signum)

    def stdout_size(self) -> int:
        try:
            return self.stdout_path.stat().st_size if self.stdout_path else 0
        except OSError:
            return 0

    def stdout(self, limit: int | None = None) -> str | None:
        """What the command printed on stdout; None when it is over `limit` bytes, or gone."""
        if limit is not None and self.stdout_size() > limit:
            return None
        try:
            return self.stdout_path.read_text("utf-8", "replace") if self.stdout_path else ""
        except OSError:
            return None

    def outcome(self, limit: int | None = INLINE_BYTES) -> Any:
        """The JSON the CLI printed (None when it printed none, or more than `limit` bytes:
        GET /runs/{id}/stdout has it whole)."""
        text = self.stdout(limit)
        try:
            return orjson.loads(text) if text and text.strip() else None
        except orjson.JSONDecodeError:
            return None
