"""A moment as JSON writes it (`views.times.iso_time`) given back to `--since`
(`cli.history.parse_since`) lists the run it was read from: the shown milliseconds are cut,
never rounded up (a run started at .1239996 s once showed as .124 and `--since` of its own
`started_at` left it out)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from barca.cli.history import parse_since
from barca.views.times import iso_time


@given(st.floats(min_value=1.5e9, max_value=2.5e9, allow_nan=False))
def test_a_shown_moment_is_never_later_than_the_moment(ts: float) -> None:
    shown = iso_time(ts)
    assert parse_since(shown) <= ts
    assert ts - parse_since(shown) < 0.001


def test_the_microseconds_just_below_a_millisecond_are_cut() -> None:
    assert iso_time(1765000000.1239996) == "2025-12-06T05:46:40.123Z"
    assert iso_time(1765000000.99999) == "2025-12-06T05:46:40.999Z"
    assert iso_time(1765000000.0) == "2025-12-06T05:46:40.000Z"
