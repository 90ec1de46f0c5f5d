"""When a `Schedule("<cron>")` fires: 5 fields (minute hour day month weekday, at second 0)
or 6 with leading seconds, read by croniter, the parser discovery validates them with.
`barca list`'s table shows the next fire in this machine's local time, its JSON in UTC
(`barca.views.times`)."""

from __future__ import annotations

from datetime import datetime


def next_fire(cron: str, after: datetime) -> datetime:
    """The first time strictly after `after` (aware: the result is in its zone) that the
    expression matches, to the second."""
    from croniter import croniter

    seconds_first = len(cron.split()) == 6
    return croniter(cron, after.replace(microsecond=0),
                    second_at_beginning=seconds_first).get_next(datetime)


def next_fire_text(cron: str, now: datetime) -> str:
    """The next fire after `now`, as human text writes it (`YYYY-MM-DD HH:MM:SS`) in `now`'s
    zone."""
    from barca.views.times import short_time

    return short_time(next_fire(cron, now))
