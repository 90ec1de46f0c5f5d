"""How a partitioned node's keys split into the four shares the web UI draws
(`barca.views.partition_shares`), on literal keys: the rule the UI's JavaScript held, on
counts, before the server sent the shares in each status entry."""

from __future__ import annotations

from barca.views.partition_shares import partition_shares


def shares(cached: int, missing: str, failed: str = "", blocked: str = "") -> dict:
    """Keys are letters: `missing` "de" is keys d and e."""
    out = partition_shares(cached, set(missing), list(failed), list(blocked)).to_json()
    assert sum(out["shares"].values()) == cached + len(missing)  # the shares make the total
    return out


def test_never_run_and_changed_keys_are_the_stale_share():
    assert shares(0, "abcdefghij") == {"shares": {"cached": 0, "stale": 10, "failed": 0,
                                                  "blocked": 0}, "failed_still_cached": 0}
    assert shares(7, "xyz")["shares"] == {"cached": 7, "stale": 3, "failed": 0, "blocked": 0}


def test_failed_keys_without_a_result_are_the_failed_share():
    assert shares(6, "wxyz", failed="wx") == {
        "shares": {"cached": 6, "stale": 2, "failed": 2, "blocked": 0},
        "failed_still_cached": 0}


def test_failed_keys_still_served_from_an_earlier_result_stay_cached_and_are_counted_apart():
    # a refresh of cached keys failed on a, b and c: each keeps its older result
    assert shares(10, "", failed="abc") == {
        "shares": {"cached": 10, "stale": 0, "failed": 0, "blocked": 0},
        "failed_still_cached": 3}
    # a failed but cached, d failed without a result, e changed: counts alone would call
    # both missing keys failed
    assert shares(3, "de", failed="ad") == {
        "shares": {"cached": 3, "stale": 1, "failed": 1, "blocked": 0},
        "failed_still_cached": 1}


def test_blocked_keys_are_the_missing_keys_that_did_not_fail_themselves():
    assert shares(2, "ab", blocked="ab")["shares"] == {"cached": 2, "stale": 0, "failed": 0,
                                                       "blocked": 2}
    assert shares(5, "abcde", failed="a", blocked="bcd")["shares"] == {
        "cached": 5, "stale": 1, "failed": 1, "blocked": 3}
    # a key both failed itself and blocked upstream counts once, as failed
    assert shares(0, "abc", failed="ab", blocked="abc")["shares"] == {
        "cached": 0, "stale": 0, "failed": 2, "blocked": 1}
