"""`barca.toml`: the project's settings, read and checked whole when a command opens the
project, so that a misspelt setting, or one for something this barca does not have yet, stops
the command (exit 2) instead of being silently ignored.

Known settings:

    [run]   capacity = 4        units of `weight=` the running steps may hold together
    [cache] max_size = "10GB"   after each run, `barca gc` down to this size ("10%" of the
                                filesystem, the default; "off": never)
    [serve] token = "..."       the token `barca serve` asks every client for
    [remote] uri = "s3://..."   the shared artifact store (store.remote_config, with the
    [remote.storage_options]    environment's BARCA_REMOTE_URI and BARCA_STORAGE_OPTIONS)
    [server] url = "http://..." the team's `barca serve`, whose ledger decides what local runs
                                compute (BARCA_SERVER wins; cli.server_option)
    [server] shared_capacity = true   those runs' steps are also admitted against the
                                server's `--capacity` (engine.local.leased_capacity)
    [executor] kind = "ray"     what runs the steps: "local" worker processes (the default)
                                or a Ray cluster (engine.ray_executor; BARCA_EXECUTOR wins)

The published tool's other settings (`default_env`, `[discovery]`)
are named as not built yet, each with what to do instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from barca.errors import UsageError

CONFIG_FILE = "barca.toml"

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SizeLimit:
    """A `[cache] max_size` as written: a number of bytes, a share of the filesystem that
    holds `.barca/` (in percent), or neither: "off"."""

    bytes: int | None = None
    percent: float | None = None

    @property
    def off(self) -> bool:
        return self.bytes is None and self.percent is None


@dataclass(frozen=True, slots=True)
class Settings:
    """What barca.toml sets; None where it is silent (the default applies)."""

    capacity: int | None = None  # [run] capacity
    cache_max_size: SizeLimit | None = None  # [cache] max_size (None: the default, 10%)
    serve_token: str | None = None  # [serve] token
    remote_uri: str | None = None  # [remote] uri
    remote_storage_options: dict | None = None  # [remote.storage_options]
    server_url: str | None = None  # [server] url
    shared_capacity: bool | None = None  # [server] shared_capacity
    executor_kind: str | None = None  # [executor] kind


NO_SETTINGS = Settings()


def parse_size(text: str) -> int | None:
    """`500MB` -> 500000000, `2GiB` -> 2147483648, `1024` -> 1024; None if not a size.

    >>> parse_size("1.5KB")
    1500
    """
    match = _SIZE.fullmatch(text)
    if not match:
        return None
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "").lower()])


def parse_limit(text: str) -> SizeLimit | None:
    """`"20GB"`, `"10%"` or `"off"` as a SizeLimit; None if it is none of these.

    >>> parse_limit("10%"), parse_limit("off").off, parse_limit("2KiB").bytes
    (SizeLimit(bytes=None, percent=10.0), True, 2048)
    """
    text = text.strip()
    if text.lower() == "off":
        return SizeLimit()
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            return None
        return SizeLimit(percent=percent) if 0 < percent <= 100 else None
    size = parse_size(text)
    return None if size is None else SizeLimit(bytes=size)


LIMIT_FORMS = '"10GB", "500MB", "2GiB", a number of bytes, "10%" (of the filesystem) or "off"'


def _capacity(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise UsageError(f"{CONFIG_FILE}: [run] capacity must be a positive integer, not "
                     f"{value!r}", "write it like `capacity = 4` (units of weight= that "
                     "running steps hold together), or remove it to use the pool size")


def _max_size(value: Any) -> SizeLimit:
    limit = None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        limit = SizeLimit(bytes=value)
    elif isinstance(value, str):
        limit = parse_limit(value)
    if limit is None:
        raise UsageError(f"{CONFIG_FILE}: [cache] max_size must be a size, not {value!r}",
                         f'write it like `max_size = "10GB"`: {LIMIT_FORMS}')
    return limit


def _token(value: Any) -> str:
    if isinstance(value, str) and value.strip() == value and value:
        return value
    raise UsageError(f"{CONFIG_FILE}: [serve] token must be a non-empty string without "
                     "surrounding spaces", 'write it like `token = "..."` (at least 16 random '
                     "characters), or set BARCA_SERVE_TOKEN instead")


def _remote_uri(value: Any) -> str:
    if isinstance(value, str) and "://" in value:
        return value
    raise UsageError(f"{CONFIG_FILE}: [remote] uri must be a URL, not {value!r}",
                     'write it like `uri = "s3://bucket/prefix"` (s3://, gs://, abfs:// or '
                     "file:// for a shared directory)")


def _storage_options(value: Any) -> dict:
    if isinstance(value, dict):
        return value
    raise UsageError(f"{CONFIG_FILE}: [remote] storage_options must be a table, not "
                     f"{value!r}", "write it as a [remote.storage_options] section of "
                     "fsspec options, e.g. `endpoint_url = \"http://127.0.0.1:9000\"`")


def _server_url(value: Any) -> str:
    if isinstance(value, str) and value.split("://", 1)[0] in ("http", "https") and \
            "://" in value and value.split("://", 1)[1]:
        return value
    raise UsageError(f"{CONFIG_FILE}: [server] url must be an http:// or https:// URL, not "
                     f"{value!r}", 'write it like `url = "http://127.0.0.1:8274"` (the '
                     "address of the team's `barca serve`)")


def _shared_capacity(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise UsageError(f"{CONFIG_FILE}: [server] shared_capacity must be true or false, not "
                     f"{value!r}", "write `shared_capacity = true` to admit this machine's "
                     "steps against the server's --capacity, or remove it")


EXECUTOR_KINDS = ("local", "ray")


def executor_kind(value: Any, where: str = f"{CONFIG_FILE}: [executor] kind") -> str:
    """A known executor kind, else a UsageError naming `where` it was written and the kinds."""
    if value in EXECUTOR_KINDS:
        return value
    raise UsageError(f"{where} must be one of {', '.join(EXECUTOR_KINDS)}, not {value!r}",
                     '"local" runs steps in worker processes on this machine, "ray" on a Ray '
                     "cluster (barca docs scale-out)")


# section -> key -> (Settings field, reader)
_KNOWN: dict[str, dict[str, tuple[str, Callable[[Any], Any]]]] = {
    "run": {"capacity": ("capacity", _capacity)},
    "cache": {"max_size": ("cache_max_size", _max_size)},
    "serve": {"token": ("serve_token", _token)},
    "remote": {"uri": ("remote_uri", _remote_uri),
               "storage_options": ("remote_storage_options", _storage_options)},
    "server": {"url": ("server_url", _server_url),
               "shared_capacity": ("shared_capacity", _shared_capacity)},
    "executor": {"kind": ("executor_kind", executor_kind)},
}

# settings of the published tool that this barca does not have yet -> what to do instead
_NOT_BUILT = {
    "discovery": "[discovery] include/exclude is not built in this barca yet; remove it and "
                 "name the pipeline files on the command line",
    "default_env": "default_env is not built in this barca yet; remove it and set BARCA_ENV "
                   "or pass --env NAME",
}


def known_settings() -> str:
    """The settings barca.toml may hold, as one line: `[run] capacity, [cache] max_size`."""
    return ", ".join(f"[{section}] {key}" for section, keys in _KNOWN.items() for key in keys)


def read_settings(root: Path) -> Settings:
    """The settings of the project at `root` (none without a barca.toml); a bad, unknown or
    not yet supported setting is a UsageError naming it and the known ones."""
    path = root / CONFIG_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return NO_SETTINGS
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}", f"make {CONFIG_FILE} a readable UTF-8 "
                         "text file") from None
    if not text.strip():
        return NO_SETTINGS
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{CONFIG_FILE} is not valid TOML: {exc}",
                         f"fix the syntax; the settings it may hold: {known_settings()}"
                         ) from None
    return _check(data)


def _check(data: dict[str, Any]) -> Settings:
    values: dict[str, Any] = {}
    for section, body in data.items():
        if section in _NOT_BUILT:
            raise UsageError(f"{CONFIG_FILE}: {_name(section, body)} is not supported by this "
                             "barca yet", _NOT_BUILT[section])
        keys = _KNOWN.get(section)
        if keys is None or not isinstance(body, dict):
            what = f"section [{section}]" if isinstance(body, dict) else f"key {section!r}"
            raise UsageError(f"{CONFIG_FILE}: unknown {what}",
                             f"remove or rename it; the known settings: {known_settings()}")
        for key, value in body.items():
            if key not in keys:
                raise UsageError(f"{CONFIG_FILE}: unknown key {key!r} in [{section}]",
                                 f"[{section}] takes {', '.join(keys)}; the known settings: "
                                 f"{known_settings()}")
            field, read = keys[key]
            values[field] = read(value)
    return Settings(**values)


def _name(section: str, body: Any) -> str:
    return f"[{section}]" if isinstance(body, dict) else f"`{section}`"
