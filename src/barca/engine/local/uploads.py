"""A worker's messages to the coordinator, in order, each sent once the uploads it waits for
are done: a remote store's uploads (packs of small results and results stored as files of
their own) are made on a thread of their own while the worker runs its next steps.

Uploading a result takes a request to the store; a worker that made it before reporting the
result's outcome computed nothing meanwhile (about 40% of a first run of small keys against
S3). So the worker's remote stores write each result's local copy and hold its upload
(RemoteStore.hold_uploads); at each flush the worker hands the held uploads to `Outbox.send`
with the `Outcomes` they hold the results of, and goes on. One thread uploads them in order
and writes the message only after its uploads are in the store: what the coordinator records
is always stored, and a kill -9 leaves nothing recorded that is not. Every other message (a
log line, a retry's `StepStarted`, `Imported`) goes through the same queue while uploads are
pending, so none overtakes the outcomes before it; with none pending it is written at once.

A message that waits may have an `early` one go ahead of it: `Computed`, which names the
steps whose outcomes wait, so that the pool leases the worker its next steps while the last
ones upload (without it a worker would compute nothing from the end of its lease to the end
of its uploads). It tells the pool where the worker is, never what to record.

An upload that fails is the run's error: `StoreFailed` goes out in place of its outcomes,
and nothing queued after it is sent (the outcomes of later uploads are not reported either,
as when the worker uploaded them itself). At most IN_FLIGHT uploads wait (or one flush's,
when it holds more): a worker that computes faster than the store takes its results waits
for it, so the results it has not reported stay few. A waiting upload holds a local file's
name, not its bytes.

Lock order: the worker's own lock (its finished list) may be held while `send` waits for
room, and this module's lock is never held while waiting for the worker's; the pipe has a
lock of its own, taken last (the upload thread writes holding only it).
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable

from barca.engine.local.frames import StoreFailed
from barca.errors import InfraError

IN_FLIGHT = 4  # uploads queued or under way, at most, before a flush waits


class Outbox:
    def __init__(self, write: Callable[[Any], None]) -> None:
        self._write = write  # one message to the coordinator's pipe
        self.pipe = threading.Lock()  # one message at a time on it
        self.cond = threading.Condition()
        self.queue: collections.deque[tuple[tuple[Callable[[], None], ...], Any]] = \
            collections.deque()
        self.uploads = 0  # uploads queued or under way
        self.failed = False  # an upload failed: nothing it or later uploads held is sent
        self.thread: threading.Thread | None = None

    def write(self, message: Any) -> None:
        with self.pipe:
            self._write(message)

    def send(self, message: Any, uploads: tuple[Callable[[], None], ...] = (),
             early: Any = None) -> None:
        """`message`, once `uploads` (each writing one result's object) and what was sent
        before are done; at once when nothing is pending. `early`, when the message waits:
        written now. Waits while IN_FLIGHT uploads are pending."""
        with self.cond:
            if not uploads and not self.queue:
                self.write(message)
                return
            while self.uploads and self.uploads + len(uploads) > IN_FLIGHT and not self.failed:
                self.cond.wait()
            if self.failed and uploads:
                return  # its results are not reported: the run stops on the failure
            if early is not None:
                self.write(early)
            self.queue.append((tuple(uploads), message))
            self.uploads += len(uploads)
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, daemon=True,
                                               name="barca-uploads")
                self.thread.start()
            self.cond.notify_all()

    def drain(self) -> None:
        """Wait until everything sent is written, or dropped after a failure (a worker told
        to stop leaves nothing the coordinator waits for behind)."""
        with self.cond:
            while self.queue:
                self.cond.wait()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.queue:
                    self.cond.wait()
                uploads, message = self.queue[0]
            try:
                for upload in uploads:
                    upload()
                    with self.cond:
                        self.uploads -= 1
                        self.cond.notify_all()
            except Exception as exc:  # noqa: BLE001 (whatever it is, the result is not stored)
                error = exc if isinstance(exc, InfraError) else InfraError(
                    f"a result could not be uploaded: {type(exc).__name__}: {exc}",
                    "check the artifact store and run again")
                with self.cond:
                    self.failed = True
                message = StoreFailed(error.message, error.remediation)
            try:
                self.write(message)
            except OSError:  # the coordinator is gone: nothing more can be reported
                with self.cond:
                    self.failed = True
            with self.cond:
                self.queue.popleft()
                if self.failed:
                    self.queue.clear()
                    self.uploads = 0
                self.cond.notify_all()
