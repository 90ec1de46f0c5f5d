"""How barca writes a moment: `utc_time` in listings and history JSON, `iso_time` (RFC 3339,
milliseconds) in log lines and the server's run rows."""

from __future__ import annotations


def utc_time(ts: float | None) -> str | None:
    """Epoch seconds as `YYYY-MM-DD HH:MM:SS` in UTC (the form every listing uses)."""
    if ts is None:
        return None
    import datetime

    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S")


def iso_time(ts: float | None) -> str | None:
    """Epoch seconds as RFC 3339 UTC with milliseconds (log line timestamps)."""
    if ts is None:
        return None
    import datetime

    moment = datetime.datetime.fromtimestamp(ts, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
