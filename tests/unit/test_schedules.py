"""Next fire times of cron expressions: 5 fields at second 0, 6 with leading seconds, strictly
after the given time, in its zone."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from barca.schedules import next_fire, next_fire_text

AT = datetime(2026, 12, 2, 5, 0, 7, 250000, tzinfo=timezone.utc)


def test_five_fields_fire_at_second_zero_of_the_next_matching_minute():
    assert next_fire("*/5 * * * *", AT) == datetime(2026, 12, 2, 5, 5, tzinfo=timezone.utc)
    assert next_fire("0 6 * * *", AT) == datetime(2026, 12, 2, 6, 0, tzinfo=timezone.utc)


def test_six_fields_read_the_first_as_seconds():
    assert next_fire("*/15 * * * * *", AT) == datetime(2026, 12, 2, 5, 0, 15,
                                                       tzinfo=timezone.utc)
    assert next_fire("0 */2 * * * *", AT) == datetime(2026, 12, 2, 5, 2, tzinfo=timezone.utc)


def test_a_matching_second_gives_the_next_one_not_itself():
    on_the_dot = datetime(2026, 12, 2, 5, 5, tzinfo=timezone.utc)
    assert next_fire("*/5 * * * *", on_the_dot) == on_the_dot + timedelta(minutes=5)
    assert next_fire("* * * * * *", on_the_dot) == on_the_dot + timedelta(seconds=1)


def test_the_expression_is_read_in_the_zone_of_the_time_given():
    paris = AT.astimezone(ZoneInfo("Europe/Paris"))  # 06:00:07 there
    fired = next_fire("0 7 * * *", paris)
    assert fired == datetime(2026, 12, 2, 7, 0, tzinfo=ZoneInfo("Europe/Paris"))
    assert fired.astimezone(timezone.utc).hour == 6


def test_the_text_form_is_local_time_to_the_second():
    assert next_fire_text("*/5 * * * *", AT) == "2026-12-02 05:05:00"
