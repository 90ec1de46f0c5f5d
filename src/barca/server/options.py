"""`barca serve`'s settings, checked before anything starts: a bad one is exit 2."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import tzinfo

from barca.errors import UsageError

MIN_TOKEN_CHARS = 16


@dataclass(frozen=True)
class ServeOptions:
    paths: tuple[str, ...]
    host: str = "127.0.0.1"
    port: int = 8274
    read_only: bool = False
    schedule: bool = True
    watch: bool = False
    timezone: str = "local"
    env: str | None = None
    run_timeout: float = 600.0  # seconds per target of a run; 0: no limit
    token: str | None = None  # --token, BARCA_SERVE_TOKEN or [serve] token (see resolve_token)
    allow_hosts: tuple[str, ...] = ()  # Host names besides the address and localhost
    insecure_no_token: bool = False  # beyond loopback without a token, knowingly
    max_runs: int | None = None  # runs at once (--max-runs); None: one per core
    capacity: int | None = None  # units of weight= every run's steps share (--capacity)
    drain_timeout: float = 30.0  # seconds a stopping server lets running runs finish

    @property
    def run_slots(self) -> int:
        import os

        return self.max_runs or os.cpu_count() or 4

    @property
    def loopback(self) -> bool:
        return ipaddress.ip_address(self.host).is_loopback

    @property
    def scheduler_on(self) -> bool:
        return self.schedule and not self.read_only


def check(options: ServeOptions) -> ServeOptions:
    try:
        ipaddress.ip_address(options.host)
    except ValueError:
        raise UsageError(f"--host {options.host!r} is not an IP address",
                         "pass an IPv4 or IPv6 address: 127.0.0.1 (default), 0.0.0.0 or ::")
    if not 0 <= options.port <= 65535:
        raise UsageError(f"--port {options.port} is out of range", "pass 0..65535 (0: any free port)")
    if options.run_timeout < 0:
        raise UsageError(f"--run-timeout {options.run_timeout:g} is negative",
                         "pass seconds per target (default 600), or 0 for no limit")
    if options.max_runs is not None and options.max_runs < 1:
        raise UsageError(f"--max-runs {options.max_runs} is below 1",
                         "pass how many runs may run at once (default: one per core)")
    if options.capacity is not None and options.capacity < 1:
        raise UsageError(f"--capacity {options.capacity} is below 1",
                         "pass the units of weight= all runs' steps may hold at once, e.g. "
                         "--capacity 8")
    if options.drain_timeout < 0:
        raise UsageError(f"--drain-timeout {options.drain_timeout:g} is negative",
                         "pass the seconds running runs get to finish at SIGTERM (default 30),"
                         " or 0 to cancel them at once")
    zone(options.timezone)
    if options.token is not None and len(options.token) < MIN_TOKEN_CHARS:
        raise UsageError(f"the server token is {len(options.token)} characters long",
                         f"use at least {MIN_TOKEN_CHARS} random characters, e.g. "
                         "`python -c 'import secrets; print(secrets.token_urlsafe())'`")
    if not options.loopback and options.token is None and not options.insecure_no_token:
        raise UsageError(f"--host {options.host} listens beyond this machine without a token: "
                         "anyone who reaches it could run your pipeline",
                         "set a token (--token, BARCA_SERVE_TOKEN or [serve] token in "
                         "barca.toml), or pass --insecure-no-token behind an authenticating "
                         "proxy")
    for name in options.allow_hosts:
        if not name or any(c in name for c in "/: @"):
            raise UsageError(f"--allow-host {name!r} is not a host name",
                             "pass a bare name such as barca.example.com (no scheme or port)")
    return options


def resolve_token(flag: str | None, configured: str | None) -> str | None:
    """The token in force: --token, else BARCA_SERVE_TOKEN, else [serve] token."""
    import os

    return flag or os.environ.get("BARCA_SERVE_TOKEN") or configured or None


def zone(name: str) -> tzinfo | None:
    """The zone schedules fire in: None for this machine's local time."""
    if name.lower() == "local":
        return None
    if name.lower() == "utc":
        from datetime import timezone

        return timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--timezone {name!r} is not a known zone",
                         "pass local, utc or an IANA name such as Europe/Paris") from None
