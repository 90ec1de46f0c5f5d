"""What crosses the warm pool's socket: typed messages, JSON on the wire.

Never pickle: nothing read from a socket is executed, and every field is checked against its
declared type before it is used. The `barca` launcher imports this before every `get` and
`run`, so it stays on what the interpreter has loaded anyway plus C modules: a message is a
small class whose annotations are its fields (a NamedTuple's shape, without importing typing),
and the JSON is written here and read by the json package's C scanner (the package itself
imports re and enum). Descriptors (stdin, pipe ends) travel beside a message as SCM_RIGHTS.
"""

from __future__ import annotations

import os
import sys

import _json  # the json package's C half: its scanner and string quoting
import _socket  # `socket` without its wrapper module, which imports enum and selectors

TYPE_CHECKING = False  # typing is not imported for it
if TYPE_CHECKING:
    from typing import Any, Iterable

_MAX_MESSAGE = 1 << 20
_FD_BYTES = 4  # a descriptor in SCM_RIGHTS is a C int


class Message:
    """A message: its fields are its class's annotations, in order, each required, given by
    position or by name (as a NamedTuple's are); `decode` checks them against the
    annotations' text."""

    _fields: tuple[str, ...] = ()
    _kinds: dict[str, str] = {}  # field -> the annotation's text

    def __init_subclass__(cls) -> None:
        cls._kinds = dict(cls.__annotations__)  # its own: {} for a class without fields
        cls._fields = tuple(cls._kinds)

    def __init__(self, *values: object, **named: object) -> None:
        name = type(self).__name__
        if len(values) > len(self._fields):
            raise TypeError(f"{name} takes {len(self._fields)} fields, not {len(values)}")
        given = dict(zip(self._fields, values))
        for field, value in named.items():
            if field not in self._kinds or field in given:
                raise TypeError(f"{name} got an unexpected or repeated field {field!r}")
            given[field] = value
        missing = [field for field in self._fields if field not in given]
        if missing:
            raise TypeError(f"{name} is missing {', '.join(missing)}")
        self.__dict__.update(given)

    def _asdict(self) -> dict[str, Any]:
        return {field: self.__dict__[field] for field in self._fields}

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._asdict() == self._asdict()

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in self._asdict().items())
        return f"{type(self).__name__}({fields})"


class Hello(Message):
    """Client -> pool: are you there, and current? Answered by `Welcome` (or `Refused`)."""


class Welcome(Message):
    modules: list[str]  # what the pool has imported
    pid: int


class ForkWorker(Message):
    """Client -> pool, with three fds (the worker's pipe ends, stderr): fork a worker."""

    root: str
    env: dict[str, str]
    idle: float  # the run's BARCA_WARM_SECONDS: the pool waits this long for the next run
    limits: list[int]  # the run's resource limits: (resource, soft, hard) flattened


class RunCommand(Message):
    """Client -> pool, with stdin, stdout and stderr: fork a process that runs `entry`:
    "cli" is `barca ARGV`, "served_run" a server's run (its order on stdin, no argv)."""

    entry: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int
    idle: float
    limits: list[int]


class Forked(Message):
    pid: int


class Exited(Message):
    """Forked command -> client: the command's exit code."""

    code: int


class Status(Message):
    """Client -> pool: how did this child of yours end? Answered by `Reaped`."""

    pid: int


class Reaped(Message):
    pid: int
    exit: str  # "code 3", "SIGSEGV", "SIGKILL (possibly the OOM killer)"; "" if unknown


class Preload(Message):
    """Client -> pool: import these third-party modules for later workers."""

    modules: list[str]


class Refused(Message):
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


def encode(message: Message) -> bytes:
    return _json_text({"type": type(message).__name__, **message._asdict()}).encode()


def _json_text(value: object) -> str:
    """JSON for what messages hold: strings, integers, finite floats, and lists and
    string-keyed dicts of them (what json.dumps writes for them, without its spaces)."""
    if isinstance(value, str):
        return _json.encode_basestring_ascii(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return int.__repr__(value)
    if isinstance(value, float) and value - value == 0:  # inf and nan are not JSON
        return float.__repr__(value)
    if isinstance(value, (list, tuple)):
        return f"[{','.join(map(_json_text, value))}]"
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return "{" + ",".join(f"{_json_text(k)}:{_json_text(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"a warm pool message cannot hold {value!r}")


class _Strict:
    """What the C scanner reads off its context: JSON's own types and nothing else."""

    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int = float, int

    @staticmethod
    def parse_constant(name: str) -> float:
        raise ValueError(f"{name} is not a number a message holds")


_scan = _json.make_scanner(_Strict())


def decode(data: bytes) -> Message:
    """A message, its fields checked against their declared types; ValueError otherwise."""
    try:
        text = data.decode()
        fields, end = _scan(text, 0)
        if end != len(text):
            raise ValueError("text after the message")
        cls = MESSAGES[fields.pop("type")]
        message = cls(**fields)
    # whatever the scanner raises on text it cannot read: StopIteration where no value
    # starts, JSONDecodeError, or on 3.11 a SystemError where it could not find that class;
    # RecursionError for a deep nest; KeyError, TypeError, AttributeError for a wrong shape
    except Exception as exc:  # noqa: BLE001 - all of it means "malformed"
        raise ValueError(f"malformed warm pool message: {type(exc).__name__} {exc}") from None
    for name, kind in cls._kinds.items():
        if not _CHECKS[kind](getattr(message, name)):
            raise ValueError(f"warm pool message {cls.__name__}.{name} is not {kind}")
    return message


def send(sock: _socket.socket, message: Message, fds: Iterable[int] = ()) -> None:
    """Send one message, with these descriptors beside it (SCM_RIGHTS)."""
    data = encode(message)
    if len(data) > _MAX_MESSAGE:
        raise OSError("warm pool message too large")
    packed = b"".join(fd.to_bytes(_FD_BYTES, sys.byteorder, signed=True) for fd in fds)
    sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, packed)] if packed else [])


def receive(sock: _socket.socket, max_fds: int = 0) -> tuple[Message, list[int]]:
    """The next message, and the descriptors that came with it (at most `max_fds`; the
    caller closes them)."""
    data, ancillary, _flags, _addr = sock.recvmsg(_MAX_MESSAGE,
                                                  _socket.CMSG_LEN(max_fds * _FD_BYTES))
    fds = [int.from_bytes(payload[at:at + _FD_BYTES], sys.byteorder, signed=True)
           for level, kind, payload in ancillary
           if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS
           for at in range(0, len(payload) - _FD_BYTES + 1, _FD_BYTES)]
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


def expect(message: Message, cls: type) -> Any:
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
