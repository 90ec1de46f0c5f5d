"""How a partitioned node's counts split into the four shares the web UI draws
(`barca.views.partition_shares`), on literal counts: the rule the UI's JavaScript held before
the server sent the shares in each status entry."""

from __future__ import annotations

from barca.views.partition_shares import partition_shares


def shares(cached: int, missing: int, failed: int, blocked: int) -> dict:
    out = partition_shares(cached, missing, failed, blocked).to_json()
    assert sum(out["shares"].values()) == cached + missing  # the shares make the total
    return out


def test_never_run_and_changed_keys_are_the_stale_share():
    assert shares(0, 10, 0, 0) == {"shares": {"cached": 0, "stale": 10, "failed": 0,
                                              "blocked": 0}, "failed_still_cached": 0}
    assert shares(7, 3, 0, 0)["shares"] == {"cached": 7, "stale": 3, "failed": 0, "blocked": 0}


def test_failed_keys_without_a_result_are_the_failed_share():
    assert shares(6, 4, 2, 0) == {"shares": {"cached": 6, "stale": 2, "failed": 2,
                                             "blocked": 0}, "failed_still_cached": 0}


def test_failed_keys_still_served_from_an_earlier_result_stay_cached_and_are_counted_apart():
    # a refresh of 10 cached keys failed on 3: each keeps its older result
    assert shares(10, 0, 3, 0) == {"shares": {"cached": 10, "stale": 0, "failed": 0,
                                              "blocked": 0}, "failed_still_cached": 3}
    # 3 failed keys, only 1 of them without a result
    assert shares(9, 1, 3, 0) == {"shares": {"cached": 9, "stale": 0, "failed": 1,
                                             "blocked": 0}, "failed_still_cached": 2}


def test_blocked_keys_are_taken_from_the_missing_keys_the_failed_ones_left():
    assert shares(2, 2, 0, 2)["shares"] == {"cached": 2, "stale": 0, "failed": 0, "blocked": 2}
    assert shares(5, 5, 1, 3)["shares"] == {"cached": 5, "stale": 1, "failed": 1, "blocked": 3}
    # a key both failed itself and blocked upstream counts once, as failed
    assert shares(0, 3, 2, 3)["shares"] == {"cached": 0, "stale": 0, "failed": 2, "blocked": 1}
