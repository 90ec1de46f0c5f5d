"""What crosses the warm pool's socket: typed messages, JSON on the wire.

Never pickle: nothing read from a socket is executed, and every field is checked against its
declared type before it is used. NamedTuples and the json module, because the `barca`
launcher imports this on every tick. Descriptors (stdin, pipe ends) travel beside a message
as SCM_RIGHTS.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Iterable, NamedTuple

_MAX_MESSAGE = 1 << 20


class Hello(NamedTuple):
    """Client -> pool: are you there, and current? Answered by `Welcome` (or `Refused`)."""


class Welcome(NamedTuple):
    modules: list[str]  # what the pool has imported
    pid: int


class ForkWorker(NamedTuple):
    """Client -> pool, with three fds (the worker's pipe ends, stderr): fork a worker."""

    root: str
    env: dict[str, str]
    idle: float  # the run's BARCA_WARM_SECONDS: the pool waits this long for the next run
    limits: list[int]  # the run's resource limits: (resource, soft, hard) flattened


class RunCommand(NamedTuple):
    """Client -> pool, with stdin, stdout and stderr: fork a process that runs `entry`:
    "cli" is `barca ARGV`, "served_run" a server's run (its order on stdin, no argv)."""

    entry: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int
    idle: float
    limits: list[int]


class Forked(NamedTuple):
    pid: int


class Exited(NamedTuple):
    """Forked command -> client: the command's exit code."""

    code: int


class Status(NamedTuple):
    """Client -> pool: how did this child of yours end? Answered by `Reaped`."""

    pid: int


class Reaped(NamedTuple):
    pid: int
    exit: str  # "code 3", "SIGSEGV", "SIGKILL (possibly the OOM killer)"; "" if unknown


class Preload(NamedTuple):
    """Client -> pool: import these third-party modules for later workers."""

    modules: list[str]


class Refused(NamedTuple):
    reason: str


MESSAGES = {cls.__name__: cls for cls in (Hello, Welcome, ForkWorker, RunCommand, Forked,
                                          Exited, Status, Reaped, Preload, Refused)}
_CHECKS = {"str": lambda v: isinstance(v, str),
           "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
           "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
           "list[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
           "list[int]": lambda v: isinstance(v, list) and all(
               isinstance(x, int) and not isinstance(x, bool) for x in v),
           "dict[str, str]": lambda v: isinstance(v, dict) and all(
               isinstance(x, str) for x in (*v, *v.values()))}


def encode(message: Any) -> bytes:
    return json.dumps({"type": type(message).__name__, **message._asdict()}).encode()


def decode(data: bytes) -> Any:
    """A message, its fields checked against their declared types; ValueError otherwise."""
    try:
        fields = json.loads(data)
        cls = MESSAGES[fields.pop("type")]
        message = cls(**fields)
    except (KeyError, TypeError, AttributeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"malformed warm pool message: {exc}") from exc
    for name, hint in cls.__annotations__.items():
        kind = getattr(hint, "__forward_arg__", hint)  # the annotation's text
        if not _CHECKS[kind](getattr(message, name)):
            raise ValueError(f"warm pool message {cls.__name__}.{name} is not {kind}")
    return message


def send(sock: socket.socket, message: Any, fds: Iterable[int] = ()) -> None:
    data = encode(message)
    if len(data) > _MAX_MESSAGE:
        raise OSError("warm pool message too large")
    socket.send_fds(sock, [data], list(fds))


def receive(sock: socket.socket, max_fds: int = 0) -> tuple[Any, list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, max_fds)
    if not data:
        for fd in fds:
            os.close(fd)
        raise EOFError("warm pool closed the connection")
    try:
        return decode(data), fds
    except ValueError:
        for fd in fds:
            os.close(fd)
        raise


def expect(message: Any, cls: type) -> Any:
    if isinstance(message, Refused):
        raise OSError(f"warm pool refused: {message.reason}")
    if not isinstance(message, cls):
        raise ValueError(f"warm pool answered {type(message).__name__}, not {cls.__name__}")
    return message


def describe_exit(returncode: int) -> str:
    """How a process ended (a `Popen.returncode`: negative for a signal), as `history` shows a
    worker's end (`worker_exit`) and `Reaped` carries it."""
    import signal

    if returncode >= 0:
        return f"code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"{name} (possibly the OOM killer)" if name == "SIGKILL" else name


def resource_limits() -> list[int]:
    """This process's resource limits (`ulimit`), flattened for `ForkWorker`/`RunCommand`: a
    forked process must run under the caller's limits, not the pool's."""
    import resource

    out: list[int] = []
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            number = getattr(resource, name)
            try:
                soft, hard = resource.getrlimit(number)
            except (OSError, ValueError):
                continue
            out += [number, soft, hard]
    return out


def exceeds_own_limits(limits: list[int]) -> str | None:
    """The first of the caller's limits this process could not grant (a hard limit above its
    own, which only root may raise), or None: then the caller must run fresh."""
    import resource

    for number, soft, hard in zip(limits[::3], limits[1::3], limits[2::3]):
        try:
            _, own_hard = resource.getrlimit(number)
        except (OSError, ValueError):
            return f"resource {number}"
        if own_hard != resource.RLIM_INFINITY and (
                hard == resource.RLIM_INFINITY or hard > own_hard):
            return f"resource {number}"
    return None


def apply_limits(limits: list[int]) -> None:
    """Take on the caller's limits (after `exceeds_own_limits` said they can be granted); an
    error here ends the forked process rather than let it run under other limits."""
    import resource

    for number, soft, hard in zip(limits[::3], limits[1::3], limits[2::3]):
        resource.setrlimit(number, (soft, hard))
