"""A worker's messages to the coordinator, in order, each sent once the uploads it waits for
are done: a remote store's packs are uploaded on a thread of their own while the worker
runs its next steps.

Uploading a pack takes a request to the store; a worker that made it before reporting the
pack's outcomes computed nothing meanwhile (about 40% of a first run of small keys against
S3). So the worker hands each flush's remote packs to `Outbox.send` with the `Outcomes`
naming them, and goes on. One thread uploads them in order and writes the message only after
its packs are in the store: what the coordinator records is always stored, and a kill -9
leaves nothing recorded that is not. Every other message (a log line, a retry's
`StepStarted`, `Imported`) goes through the same queue while uploads are pending, so none
overtakes the outcomes before it; with none pending it is written at once.

An upload that fails is the run's error: `StoreFailed` goes out in place of its outcomes,
and nothing queued after it is sent (the outcomes of later packs are not reported either, as
when the worker uploaded them itself). At most IN_FLIGHT packs wait: a worker that computes
faster than the store takes its packs waits for it, so the packs it holds stay few.

Lock order: the worker's own lock (its finished list) may be held while `send` waits for
room, and this module's lock is never held while waiting for the worker's; the upload
thread writes to the pipe without this lock (only it writes while anything is queued).
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable

from barca.engine.local.frames import StoreFailed
from barca.errors import InfraError

IN_FLIGHT = 4  # packs queued or being uploaded, at most, before a flush waits


def in_background(store: Any) -> bool:
    """Whether a store's packs are uploaded by the outbox (a remote store's); a local
    store's are written at the flush, which takes about as long as handing them over."""
    return bool(getattr(store, "uploads_in_background", False))


class Outbox:
    def __init__(self, write: Callable[[Any], None]) -> None:
        self.write = write  # one message to the coordinator's pipe
        self.cond = threading.Condition()
        self.queue: collections.deque[tuple[tuple[Callable[[], None], ...], Any]] = \
            collections.deque()
        self.packs = 0  # uploads queued or under way
        self.failed = False  # an upload failed: nothing it or later uploads held is sent
        self.thread: threading.Thread | None = None

    def send(self, message: Any, uploads: tuple[Callable[[], None], ...] = ()) -> None:
        """`message`, once `uploads` (each writing one pack) and what was sent before are
        done; at once when nothing is pending. Waits while IN_FLIGHT packs are pending."""
        with self.cond:
            if not uploads and not self.queue:
                self.write(message)
                return
            while self.packs and self.packs + len(uploads) > IN_FLIGHT and not self.failed:
                self.cond.wait()
            if self.failed and uploads:
                return  # its results are not reported: the run stops on the failure
            self.queue.append((tuple(uploads), message))
            self.packs += len(uploads)
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
                        self.packs -= 1
                        self.cond.notify_all()
            except Exception as exc:  # noqa: BLE001 (whatever it is, the pack is not stored)
                error = exc if isinstance(exc, InfraError) else InfraError(
                    f"a results pack could not be uploaded: {type(exc).__name__}: {exc}",
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
                    self.packs = 0
                self.cond.notify_all()
