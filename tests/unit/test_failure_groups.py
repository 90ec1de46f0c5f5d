"""How failures are grouped for the web UI (`barca.views.failure_groups`), on literal data:
the rules the UI's JavaScript held before the server sent the groups."""

from __future__ import annotations

from barca.views.failure_groups import GROUPS, error_group, merged_key_failures, \
    run_failure_groups


def test_an_error_quoting_its_key_values_writes_them_key_longest_first():
    step = "p.py:sales[region=eu,shop=eu-7]"
    assert error_group("no feed for eu-7 in eu\nTraceback ...", step) == \
        "no feed for {key} in {key}"
    assert error_group("row 7 bad", "p.py:sales[shop=7]") == "row 7 bad"  # too short to tell
    assert error_group(None, "p.py:plain") == "failed"


def test_a_runs_failed_steps_group_by_their_error_the_most_common_first():
    steps = [{"step_id": f"p.py:a[k={k}]", "node_id": "p.py:a", "status": "failed",
              "error": f"missing {k}"} for k in ("k1", "k2", "k3", "k4", "k5", "k6")]
    steps += [{"step_id": "p.py:b", "node_id": "p.py:b", "status": "failed", "error": "boom"},
              {"step_id": "p.py:c", "node_id": "p.py:c", "status": "success", "error": None}]
    assert run_failure_groups(reversed(steps)) == [
        {"error": "missing {key}", "node_id": "p.py:a", "count": 6,
         "sample_steps": [f"p.py:a[k=k{i}]" for i in (6, 5, 4, 3, 2)]},
        {"error": "boom", "node_id": "p.py:b", "count": 1, "sample_steps": ["p.py:b"]}]


def group(error: str, count: int, keys: list[str], error_type: str = "ValueError") -> dict:
    return {"error": error, "error_type": error_type, "count": count, "sample_keys": keys}


def test_groups_of_one_key_quoting_it_merge_and_say_when_more_may_exist():
    merged, grouped = merged_key_failures([group("bad schema", 5, ["a1", "a2"]),
                                           group("no feed for r1", 1, ["r1"]),
                                           group("no feed for r2", 1, ["r2"]),
                                           group("no feed for r3", 1, ["r3"], "KeyError")])
    assert grouped == 8
    assert merged == [
        {"error": "bad schema", "error_type": "ValueError", "count": 5,
         "sample_keys": ["a1", "a2"], "at_least": False, "generic": False},
        {"error": "no feed for {key}", "error_type": "ValueError", "count": 2,
         "sample_keys": ["r1", "r2"], "at_least": False, "generic": True},
        {"error": "no feed for {key}", "error_type": "KeyError", "count": 1,
         "sample_keys": ["r3"], "at_least": False, "generic": True}]
    # as many groups as the store sends: keys past them may share a merged error
    full = [group(f"no feed for r{i}", 1, [f"r{i}"]) for i in range(GROUPS)]
    [only], grouped = merged_key_failures(full)
    assert (only["count"], only["at_least"], grouped) == (GROUPS, True, GROUPS)
