"""How barca writes a moment, in two forms and only these.

- JSON (every `--json` command, every HTTP answer of `barca serve`, the Python API's dicts):
  `iso_time`, RFC 3339 in UTC with milliseconds, `2026-12-05T16:30:18.123Z`: one form a
  program parses with any date library (`Date.parse`, `datetime.fromisoformat`), that sorts as
  text and says its zone.
- Human text (tables, `--pretty`, stderr notes): `short_time`, `YYYY-MM-DD HH:MM:SS`, in UTC
  (`utc_time`) unless a command says otherwise (`barca list` shows the next fire in this
  machine's time zone, `barca serve` in the server's).

Durations stay numbers of seconds.
"""

from __future__ import annotations

import datetime
import math

SHORT_FORM = "%Y-%m-%d %H:%M:%S"


def iso_time(ts: float | None) -> str | None:
    """Epoch seconds as JSON writes a moment: RFC 3339, UTC, milliseconds, `Z`. The
    milliseconds are cut, never rounded up (not even by way of the microseconds, which
    `fromtimestamp` rounds): a moment shown is never later than the one it shows, so
    `--since` given a run's own `started_at` lists that run."""
    if ts is None:
        return None
    whole = math.floor(ts)
    moment = datetime.datetime.fromtimestamp(whole, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int((ts - whole) * 1000):03d}Z"


def short_time(moment: datetime.datetime) -> str:
    """A moment as human text writes it, in the moment's own zone: `YYYY-MM-DD HH:MM:SS`."""
    return moment.strftime(SHORT_FORM)


def utc_time(ts: float | None) -> str | None:
    """Epoch seconds as human text writes them in UTC (`short_time`)."""
    if ts is None:
        return None
    return short_time(datetime.datetime.fromtimestamp(ts, datetime.timezone.utc))


def local_time(text: str | None) -> str | None:
    """A moment JSON wrote (`iso_time`) as human text in this machine's time zone (`barca
    list`'s next fires)."""
    if text is None:
        return None
    return short_time(datetime.datetime.fromisoformat(text).astimezone())


def utc_time_of(moment: str | None) -> str | None:
    """An `iso_time` moment as human text writes it in UTC (text drawn from a JSON answer)."""
    if moment is None:
        return None
    return utc_time(datetime.datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp())
