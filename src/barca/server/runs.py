"""The runs this server started: each a `barca get|run ... --json --events` child process
(`driver.start_command`), followed by a thread that turns its stderr into events. Its stdout,
the JSON the CLI prints (all 200,000 values of a partitioned target: megabytes), goes to a
file in the server's spool directory, read only when a client asks for it.

A run id is chosen here and passed to the child, so a client has it before the run starts. A
run is `pending` while it waits for a slot (one per core: more runs at once would only share
the cores) and until the child has checked the request against the graph (`run_accepted`),
`running` until it exits, then `complete`, `failed` or `cancelled` by its exit code. A run
that outlives its time limit is cancelled and reported `failed` ("run timed out").
"""

from __future__ import annotations

import asyncio
import collections
import os
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import orjson

from barca.cli.output import note
from barca.cli.progress import EVENT_MARK
from barca.engine.driver import start_command
from barca.errors import UsageError
from barca.server.events import EventLog

CANCEL_GRACE_SECONDS = 5.0
KEEP_FINISHED_SECONDS = 3600.0
MAX_WAITING = 100  # runs queued for a slot; past this a request is refused (503)
MAX_ITEMS, MAX_TEXT = 256, 4096  # a RunRequest's lists, and each text in them
MAX_FIELD_BYTES = 64 * 1024  # a field's JSON: it becomes one argument (Linux allows 128 KiB)
INLINE_BYTES = 256 * 1024  # an output up to this size travels in the run's last event
STATUS_BY_CODE = {0: "complete", 1: "failed", 130: "cancelled"}


@dataclass
class RunRequest:
    """What a client asks for (the body of `POST /runs`), checked by `parse_request`."""

    command: str = "get"  # get | run (| serve, from the scheduler only)
    targets: tuple[str, ...] = ()
    refresh: tuple[str, ...] = ()
    refresh_all: bool = False
    cascade: bool = True
    dry_run: bool = False
    batch: tuple[str, ...] = ()
    partition: tuple[str, ...] = ()
    output: str = "json"  # what the CLI prints on stdout: json, or pretty (a remote terminal)
    value: bool = True  # False (a scheduled tick): the JSON leaves the target's value out

    def argv(self, files: Sequence[str], run_id: str, triggered_by: str,
             env: str | None) -> list[str]:
        # "serve": the scheduler's run of assets and tasks due together (`run --shared`)
        command = "run" if self.command == "serve" else self.command
        argv = [command, *([",".join(self.targets)] if self.targets else []), *files,
                f"--{self.output}", "--events", "--run-id", run_id,
                "--triggered-by", triggered_by]
        if self.refresh:
            argv += ["--refresh", ",".join(self.refresh)]
        argv += ["--refresh-all"] * self.refresh_all + ["--no-cascade"] * (not self.cascade)
        argv += ["--dry-run"] * self.dry_run + ["--shared"] * (self.command == "serve")
        argv += ["--no-value"] * (not self.value)
        for text in self.batch:
            argv += ["--batch", text]
        for text in self.partition:
            argv += ["--partition", text]
        return argv + (["--env", env] if env else [])


FIELDS = {"command": str, "targets": list, "refresh": list, "refresh_all": bool,
          "cascade": bool, "dry_run": bool, "batch": list, "partition": (list, dict),
          "files": list, "output": str}


def parse_request(body: Any, served_files: Sequence[str]) -> RunRequest:
    """A RunRequest from a client's JSON; UsageError naming what is wrong."""
    if not isinstance(body, dict):
        raise UsageError("the request body must be a JSON object",
                         'send e.g. {"command": "get", "targets": ["summary"]}')
    for name, value in body.items():
        if name not in FIELDS:
            raise UsageError(f"unknown field {name[:40]!r}", f"fields: {', '.join(FIELDS)}")
        if not isinstance(value, FIELDS[name]) or isinstance(value, list) and not all(
                isinstance(v, str) for v in value):
            raise UsageError(f"field {name!r} has the wrong type",
                             "see the RunRequest schema at /openapi.json")
        _check_size(name, value)
    if body.get("command", "get") not in ("get", "run"):
        raise UsageError(f"command {body['command']!r} is not get or run", "pass get or run")
    if body.get("output", "json") not in ("json", "pretty"):
        raise UsageError(f"output {body['output']!r} is not json or pretty",
                         "pass json (default) or pretty")
    unknown = [f for f in body.get("files", ()) if f not in served_files]
    if unknown:
        raise UsageError(f"{', '.join(u[:100] for u in unknown[:5])} is not served here",
                         f"this server runs {', '.join(served_files) or 'no files'}")
    partition = body.get("partition", ())
    if isinstance(partition, dict):
        partition = (orjson.dumps(partition).decode(),)
    return RunRequest(body.get("command", "get"), tuple(body.get("targets", ())),
                      tuple(body.get("refresh", ())), body.get("refresh_all", False),
                      body.get("cascade", True), body.get("dry_run", False),
                      tuple(body.get("batch", ())), tuple(partition),
                      body.get("output", "json"))


def _check_size(name: str, value: Any) -> None:
    """Lists of at most MAX_ITEMS texts of at most MAX_TEXT characters, at most
    MAX_FIELD_BYTES a field, no NUL: a request names nodes and keys; anything else is refused
    before it is matched or echoed, or made into the run's command line (where a NUL or an
    argument over 128 KiB would fail the server's exec, a 500)."""
    items = value if isinstance(value, list) else list(value.values()) \
        if isinstance(value, dict) else [value]
    if len(items) > MAX_ITEMS:
        raise UsageError(f"field {name!r} has {len(items)} items", f"send at most {MAX_ITEMS}")
    if any(isinstance(v, str) and len(v) > MAX_TEXT for v in items):
        raise UsageError(f"field {name!r} holds a text over {MAX_TEXT} characters",
                         "send node names and keys, not data")
    try:
        size = len(orjson.dumps(value))
    except orjson.JSONEncodeError:  # nested deeper than orjson writes (a dict's values)
        raise UsageError(f"field {name!r} is nested too deeply",
                         "a partition is {dimension: [keys]}") from None
    if size > MAX_FIELD_BYTES:
        raise UsageError(f"field {name!r} is {size:,} bytes of JSON",
                         f"send at most {MAX_FIELD_BYTES // 1024} KiB a field: node names and "
                         "keys, not data")
    if any(isinstance(v, str) and "\0" in v for v in items):
        raise UsageError(f"field {name!r} holds a NUL character",
                         "node names and keys are text without NUL")


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
    accepted: bool = False  # the child checked the request: the run is going ahead
    timed_out: float | None = None  # the time limit it was cancelled at
    settled: threading.Event = field(default_factory=threading.Event)  # accepted or ended
    ended: threading.Event = field(default_factory=threading.Event)
    timer: threading.Timer | None = None  # its time limit

    @property
    def live(self) -> bool:
        return self.status in ("pending", "running")

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


class Runs:
    """Start, follow, cancel and forget runs: at most `slots` running at once (dry runs,
    which execute nothing, aside), the rest waiting in order; each stopped after
    `time_limit` seconds per target (0: never)."""

    def __init__(self, root: Path, files: Sequence[str], env: str | None,
                 loop: asyncio.AbstractEventLoop, slots: int, time_limit: float) -> None:
        self.root, self.files, self.env, self.loop = root, files, env, loop
        self.slots, self.time_limit = slots, time_limit
        self.runs: dict[str, LiveRun] = {}
        self.waiting: collections.deque[LiveRun] = collections.deque()
        self.spool = Path(tempfile.mkdtemp(prefix="barca-serve-"))  # runs' stdout files
        self.closing = False
        self.lock = threading.Lock()  # a run starts before shutdown sees it, or not at all

    def start(self, request: RunRequest, triggered_by: str = "api") -> LiveRun:
        """Start a run now, or queue it for the next free slot (call from the event loop's
        thread: its EventLog belongs to the loop)."""
        self._forget_old()
        with self.lock:
            if self.closing:
                raise Busy("the server is shutting down")
            if len(self.waiting) >= MAX_WAITING:
                raise Busy(f"{MAX_WAITING} runs are already waiting for a slot")
            run = LiveRun(os.urandom(6).hex(), request, triggered_by, EventLog(self.loop))
            self.runs[run.run_id] = run
            if request.dry_run or self._running() < self.slots:
                return self._launch(run)
            self.waiting.append(run)
            run.settled.set()  # queued: the request is taken, its checks come when it starts
            return run

    def _running(self) -> int:
        return sum(r.live and r.process is not None for r in self.runs.values()
                   if not r.request.dry_run)

    def _start_waiting(self) -> None:
        """Launch queued runs while slots are free (a run just ended)."""
        with self.lock:
            while self.waiting and not self.closing and self._running() < self.slots:
                run = self.waiting.popleft()
                try:
                    self._launch(run)
                except OSError as exc:
                    self._end_unstarted(run, "failed", f"the run could not start: {exc}")

    def _end_unstarted(self, run: LiveRun, status: str, error: str) -> None:
        """A queued run ends without having started (cancelled, or it could not start)."""
        run.status, run.finished_at = status, time.time()
        run.exit_code = 130 if status == "cancelled" else 3
        run.error = {"error": error, "kind": status}
        run.events.append({"type": "run_finished", "run_id": run.run_id, "ok": False,
                           "status": status, "exit_code": run.exit_code, "outcome": None,
                           "error": run.error, "stdout": "", "stdout_bytes": 0})
        run.events.close()
        run.ended.set()
        run.settled.set()

    def _launch(self, run: LiveRun) -> LiveRun:
        request, triggered_by = run.request, run.triggered_by
        argv = request.argv(self.files, run.run_id, triggered_by, self.env)
        run.stdout_path = self.spool / f"{run.run_id}.out"
        out = os.open(run.stdout_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err_r, err_w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            process = start_command(self.root, argv, child_env(), (devnull, out, err_w))
        except BaseException:
            os.close(err_r)
            run.stdout_path.unlink(missing_ok=True)
            del self.runs[run.run_id]
            raise
        finally:
            for fd in (devnull, out, err_w):
                os.close(fd)
        run.process = process
        if self.time_limit and not run.request.dry_run:
            limit = self.time_limit * max(1, len(run.request.targets))
            run.timer = threading.Timer(limit, self._time_out, args=(run, limit))
            run.timer.daemon = True
            run.timer.start()
        threading.Thread(target=self._follow, args=(run, process, err_r), daemon=True,
                         name=f"barca-run-{run.run_id}").start()
        return run

    def _follow(self, run: LiveRun, process, err_r: int) -> None:
        with os.fdopen(err_r, "r", encoding="utf-8", errors="replace") as stderr:
            for text in stderr:
                self._on_line(run, text.rstrip("\n"))
        code = process.wait()
        run.exit_code = code
        run.status = "failed" if run.timed_out else STATUS_BY_CODE.get(code, "failed")
        if run.timed_out:
            run.error = {"error": f"run timed out after {run.timed_out:g}s", "kind": "timeout",
                         "remediation": "barca serve --run-timeout SECONDS allows longer runs"}
        run.finished_at = time.time()
        run.events.append({"type": "run_finished", "run_id": run.run_id,
                           "ok": code == 0, "status": run.status, "exit_code": code,
                           "outcome": run.outcome(), "error": run.error,
                           "stdout": run.stdout(INLINE_BYTES),
                           "stdout_bytes": run.stdout_size()})
        run.events.close()
        run.ended.set()
        run.settled.set()
        if run.timer is not None:
            run.timer.cancel()
        self._start_waiting()

    def _time_out(self, run: LiveRun, limit: float) -> None:
        if run.live:
            note(f"[barca] run {run.run_id} timed out after {limit:g}s: cancelling it")
            run.timed_out = limit
            self.cancel(run)

    def _on_line(self, run: LiveRun, text: str) -> None:
        if text.startswith(EVENT_MARK):
            try:
                event = orjson.loads(text[1:])
            except orjson.JSONDecodeError:
                event = {"type": "line", "line": text[1:]}
        else:
            event = {"type": "line", "line": text}
            if text.startswith("{"):
                try:
                    envelope = orjson.loads(text)
                    if isinstance(envelope, dict) and "kind" in envelope:
                        run.error = envelope  # the CLI's error envelope (it runs with --json)
                except orjson.JSONDecodeError:
                    pass
        if event.get("type") == "run_accepted":
            run.status, run.accepted = "running", True
            run.settled.set()
        run.events.append(event)

    def get(self, run_id: str) -> LiveRun | None:
        return self.runs.get(run_id)

    def cancel(self, run: LiveRun) -> None:
        """Ask the run to stop (it records itself cancelled); killed if it has not within
        CANCEL_GRACE_SECONDS."""
        if not run.live:
            return
        with self.lock:
            if run in self.waiting:
                self.waiting.remove(run)
                self._end_unstarted(run, "cancelled", "cancelled before it started")
                return
        run.signal(signal.SIGTERM)
        timer = threading.Timer(CANCEL_GRACE_SECONDS, self._kill_if_live, args=(run,))
        timer.daemon = True  # shutdown does not wait for it: it stops every run itself
        timer.start()

    def _kill_if_live(self, run: LiveRun) -> None:
        if run.live:
            run.signal(signal.SIGKILL)

    def live_runs(self) -> list[LiveRun]:
        return [r for r in self.runs.values() if r.live]

    def stop_all(self, deadline: float) -> list[LiveRun]:
        """Stop accepting and cancel every live run; wait until `deadline` (monotonic) for
        them to end, then kill what is left. The runs killed (their rows may still say
        running)."""
        with self.lock:
            self.closing = True
            while self.waiting:
                self._end_unstarted(self.waiting.popleft(), "cancelled",
                                    "the server stopped before it started")
            live = self.live_runs()
        for run in live:
            run.signal(signal.SIGTERM)
        for run in live:
            run.ended.wait(max(0.0, deadline - time.monotonic()))
        killed = [r for r in live if r.live]
        for run in killed:
            run.signal(signal.SIGKILL)
        return killed

    def _forget_old(self) -> None:
        cutoff = time.time() - KEEP_FINISHED_SECONDS
        for run_id in [i for i, r in self.runs.items()
                       if not r.live and (r.finished_at or 0) < cutoff]:
            run = self.runs.pop(run_id)
            if run.stdout_path is not None:
                run.stdout_path.unlink(missing_ok=True)

    def close(self) -> None:
        """Remove the spool (the server is stopping; its runs have ended)."""
        shutil.rmtree(self.spool, ignore_errors=True)


def child_env() -> dict[str, str]:
    """The environment of a command the server runs: its own, without BARCA_SERVER (a
    command told to run on this server would ask this server to run it, again)."""
    env = dict(os.environ)
    for name in ("BARCA_SERVER", "BARCA_SERVER_TOKEN", "BARCA_SERVE_TOKEN"):
        env.pop(name, None)  # and no step sees the server's token
    return env


def run_captured(root: Path, argv: Sequence[str]) -> dict:
    """Run `barca ARGV` to its end: {exit_code, stdout, stderr} (blocks)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = start_command(root, argv, child_env(), (devnull, out.fileno(),
                                                              err.fileno()))
        finally:
            os.close(devnull)
        code = process.wait()
        out.seek(0)
        err.seek(0)
        return {"exit_code": code, "stdout": out.read().decode("utf-8", "replace"),
                "stderr": err.read().decode("utf-8", "replace")}


class Busy(Exception):
    """No run can start now (503)."""
