"""batch= grouping as a pure function: every form of the seed's "Choosing the grouping"."""

from __future__ import annotations

import pytest

from barca.errors import UsageError
from barca.planner.batching import (ALL, LISTED, NONE, BatchOverrides, BatchSetting, batch_calls,
                                    batch_plan, describe, effective_batch,
                                    group_key, groups_setting, label_argument, labels_setting,
                                    node_overrides, override_value, parse_overrides,
                                    setting_from_text, size_setting)

NODE = "pipeline.py:scored"
KEYS = [f"r{i:02d}" for i in range(1, 8)]  # r01..r07, declared order


def calls(setting, keys=KEYS, labels=None, dims=()):
    return batch_calls(NODE, setting, keys, labels, dims)


# --- reading the discovered text -----------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    (None, None),
    ('"all"', ALL),
    ("'all'", ALL),
    ("20", BatchSetting("size", size=20)),
    ("1", BatchSetting("size", size=1)),
    ('batches([["r1", "r2"], ["r3"]])',
     BatchSetting("groups", groups=(("r1", "r2"), ("r3",)))),
    ('batches([["r1"]], strict=True)', BatchSetting("groups", groups=(("r1",),), strict=True)),
    ('barca.batches([["r1"]])', BatchSetting("groups", groups=(("r1",),))),
    ("batches([[1, 2]])", BatchSetting("groups", groups=(("1", "2"),))),
    ('batches([[("emea", 1)]])', BatchSetting("groups", groups=(('["emea","1"]',),))),
    ("batches(make_groups())", BatchSetting("groups")),
    ("batches(GROUPS, strict=True)", BatchSetting("groups", strict=True)),
    ("batches_by(region_of)", BatchSetting("labels")),
    ("batches_by(region_of, max_size=20)", BatchSetting("labels", size=20)),
    ("barca.batches_by(lambda k: k[:2])", BatchSetting("labels")),
])
def test_setting_from_text(text, expected):
    assert setting_from_text(NODE, text) == expected


@pytest.mark.parametrize("text", ["0", "-1", "True", '"some"', "2.5", "batches_by(f, max_size=0)",
                                  "batches([[]])", 'batches([["a"], ["a"]])', "batches([1.5])"])
def test_setting_from_bad_text_is_a_usage_error(text):
    with pytest.raises(UsageError) as e:
        setting_from_text(NODE, text)
    assert e.value.exit_code == 2 and e.value.remediation


def test_settings_are_frozen_and_hashable():
    s = setting_from_text(NODE, 'batches([["r1"]])')
    with pytest.raises(Exception):
        s.kind = "all"  # type: ignore[misc]
    assert hash(s) == hash(setting_from_text(NODE, 'batches([["r1"]])'))


# --- omitted / None and --batch none -------------------------------------------------------

def test_a_node_without_batch_is_not_batched():
    assert calls(None) is None
    assert calls(None, keys=[]) is None


def test_batch_none_is_one_key_per_call_in_the_batch_form():
    assert calls(NONE, keys=["r1", "r2"]) == (("r1",), ("r2",))


# --- N -------------------------------------------------------------------------------------

def test_size_chunks_in_key_order():
    assert calls(size_setting(3)) == (("r01", "r02", "r03"), ("r04", "r05", "r06"), ("r07",))


def test_size_larger_than_keys_is_one_call():
    assert calls(size_setting(20), keys=["b", "a"]) == (("b", "a"),)


def test_size_one():
    assert calls(size_setting(1), keys=["x", "y"]) == (("x",), ("y",))


@pytest.mark.parametrize("bad", [0, -3, True, 2.0, "3"])
def test_size_must_be_a_positive_int(bad):
    with pytest.raises(UsageError):
        size_setting(bad)


# --- "all" ---------------------------------------------------------------------------------

def test_all_is_one_call_of_every_stale_key():
    assert calls(ALL, keys=["r03", "r11", "r17"]) == (("r03", "r11", "r17"),)


@pytest.mark.parametrize("setting", [ALL, NONE, BatchSetting("size", size=5),
                                     groups_setting(NODE, [["r01"]], strict=True),
                                     labels_setting(2)])
def test_no_stale_key_gives_no_call(setting):
    assert calls(setting, keys=[], labels={}) == ()


# --- batches([...]) ------------------------------------------------------------------------

GROUPS = [["r01", "r02"], ["r03", "r04", "r05"]]


def test_groups_as_named_keys_in_no_group_alone():
    assert calls(groups_setting(NODE, GROUPS)) == (
        ("r01", "r02"), ("r03", "r04", "r05"), ("r06",), ("r07",))


def test_only_stale_keys_are_grouped():
    # r01/r02 all cached: no call; r03..r05 partly stale: the stale ones together
    assert calls(groups_setting(NODE, GROUPS), keys=["r04", "r05", "r07"]) == (
        ("r04", "r05"), ("r07",))


def test_group_keys_follow_key_order_not_the_groups_order():
    setting = groups_setting(NODE, [["r05", "r01"], ["r03", "r02"]])
    assert calls(setting, keys=["r01", "r02", "r03", "r05"]) == (
        ("r01", "r05"), ("r02", "r03"))


def test_calls_are_ordered_by_their_first_key():
    setting = groups_setting(NODE, [["r04", "r05"]])
    assert calls(setting, keys=["r01", "r04", "r02", "r05"]) == (
        ("r01",), ("r04", "r05"), ("r02",))


def test_strict_miss_is_a_usage_error_naming_node_key_and_fix():
    setting = groups_setting(NODE, GROUPS, strict=True)
    with pytest.raises(UsageError) as e:
        calls(setting)
    assert NODE in e.value.message and "r06" in e.value.message
    assert "strict=True" in e.value.remediation and "r06" in e.value.remediation
    assert e.value.exit_code == 2


def test_strict_names_the_key_by_its_label():
    setting = groups_setting(NODE, [["a"]], strict=True)
    with pytest.raises(UsageError) as e:
        batch_calls(NODE, setting, ["b"], dims=["retailer"])
    assert "retailer=b" in e.value.message


def test_strict_with_every_stale_key_grouped_is_fine():
    setting = groups_setting(NODE, GROUPS, strict=True)
    assert calls(setting, keys=["r02", "r03"]) == (("r02",), ("r03",))


def test_strict_ignores_cached_keys_in_no_group():
    # r06, r07 are in no group but do not need to run
    assert calls(groups_setting(NODE, GROUPS, strict=True), keys=["r01"]) == (("r01",),)


def test_no_groups_at_all_runs_every_key_alone():
    assert calls(groups_setting(NODE, []), keys=["a", "b"]) == (("a",), ("b",))


@pytest.mark.parametrize("groups", [[["a"], []], [["a"], ["b", "a"]], "ab", [[1.5]],
                                    [[None]], [["a", True]]])
def test_bad_groups_are_usage_errors(groups):
    with pytest.raises(UsageError) as e:
        groups_setting(NODE, groups)
    assert NODE in e.value.message and e.value.remediation


def test_int_keys_in_groups_match_their_text():
    assert groups_setting(NODE, [[1, "2"]]).groups == (("1", "2"),)


def test_unevaluated_groups_refuse_to_group():
    with pytest.raises(ValueError):
        calls(setting_from_text(NODE, "batches(GROUPS)"))


def test_multi_dimension_groups_match_raw_keys():
    k1, k2, k3 = '["1","emea"]', '["1","amer"]', '["2","emea"]'
    setting = groups_setting(NODE, [[("1", "emea"), ("2", "emea")]])
    assert group_key(("1", "emea")) == k1
    assert calls(setting, keys=[k2, k1, k3]) == ((k2,), (k1, k3))


# --- batches_by(fn) ------------------------------------------------------------------------

REGION = {"r01": "emea", "r02": "amer", "r03": "emea", "r04": "apac", "r05": "amer",
          "r06": "emea", "r07": 7}


def test_same_label_shares_a_call_ordered_by_first_key():
    assert calls(labels_setting(), labels=REGION) == (
        ("r01", "r03", "r06"), ("r02", "r05"), ("r04",), ("r07",))


def test_max_size_splits_each_label():
    assert calls(labels_setting(2), labels=REGION) == (
        ("r01", "r03"), ("r02", "r05"), ("r04",), ("r06",), ("r07",))


def test_labels_only_for_stale_keys():
    assert calls(labels_setting(), keys=["r03", "r05", "r06"], labels=REGION) == (
        ("r03", "r06"), ("r05",))


def test_int_and_str_labels_are_distinct():
    assert calls(labels_setting(), keys=["a", "b"], labels={"a": 1, "b": "1"}) == (
        ("a",), ("b",))


@pytest.mark.parametrize("label", [True, None, 1.5, ("emea",), b"emea"])
def test_a_label_not_str_or_int_is_a_usage_error(label):
    with pytest.raises(UsageError) as e:
        calls(labels_setting(), keys=["r01", "r02"], labels={"r01": "emea", "r02": label},
              dims=["retailer"])
    assert NODE in e.value.message and "retailer=r02" in e.value.message
    assert e.value.remediation and e.value.exit_code == 2


def test_labels_are_required_for_batches_by():
    with pytest.raises(ValueError):
        calls(labels_setting())


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_bad_max_size(bad):
    with pytest.raises(UsageError):
        labels_setting(bad)


def test_label_argument_is_the_value_or_a_dict_of_dimensions():
    assert label_argument(["retailer"], "r1") == "r1"
    assert label_argument([], "r1") == "r1"
    assert label_argument(["day", "region"], '["1","emea"]') == {"day": "1", "region": "emea"}


# --- stability -----------------------------------------------------------------------------

@pytest.mark.parametrize("setting, labels", [
    (ALL, None), (size_setting(2), None), (groups_setting(NODE, GROUPS), None),
    (labels_setting(), REGION), (labels_setting(2), REGION)])
def test_same_input_gives_the_same_calls(setting, labels):
    first = calls(setting, labels=labels)
    shuffled = dict(reversed(list(labels.items()))) if labels else None
    assert calls(setting, labels=shuffled) == first == calls(setting, labels=labels)
    assert sorted(k for c in first for k in c) == KEYS  # every stale key once


# --- overrides -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("none", NONE), ("all", ALL), ("20", BatchSetting("size", size=20)), (" 3 ", size_setting(3))])
def test_override_value(text, expected):
    assert override_value(text) == expected


@pytest.mark.parametrize("text", ["0", "-2", "", "ALL", "1.5", "x", "²"])
def test_bad_override_value(text):
    with pytest.raises(UsageError) as e:
        override_value(text)
    assert "--batch" in e.value.remediation


def test_parse_overrides():
    o = parse_overrides(["all", "scored=20", "orders=none"])
    assert o == BatchOverrides(ALL, (("scored", size_setting(20)), ("orders", NONE)))
    assert parse_overrides([]) == BatchOverrides()
    assert parse_overrides(["pipeline.py:scored=all"]).nodes == (("pipeline.py:scored", ALL),)


@pytest.mark.parametrize("texts", [["all", "none"], ["=5"], ["s=1", "s=2"], ["s=bad"], ["s="]])
def test_bad_overrides(texts):
    with pytest.raises(UsageError):
        parse_overrides(texts)


DECLARED = {"pipeline.py:scored": "all", "pipeline.py:orders": None}


def resolve(name):
    ids = [i for i in DECLARED if i == name or i.endswith(":" + name)]
    if not ids:
        raise UsageError(f"unknown target '{name}'", "see barca list")
    return ids[0]


def test_node_overrides_resolve_names():
    o = parse_overrides(["scored=20"])
    assert node_overrides(o, resolve, lambda i: DECLARED[i] is not None, lambda i: True) == {
        "pipeline.py:scored": size_setting(20)}


def test_naming_a_node_without_batch_is_a_usage_error():
    with pytest.raises(UsageError) as e:
        node_overrides(parse_overrides(["orders=all"]), resolve,
                       lambda i: DECLARED[i] is not None, lambda i: True)
    assert "pipeline.py:orders" in e.value.message and "batch=" in e.value.remediation
    assert e.value.exit_code == 2


def test_a_node_named_twice_by_different_names():
    with pytest.raises(UsageError):
        node_overrides(parse_overrides(["scored=1", "pipeline.py:scored=2"]), resolve,
                       lambda i: True, lambda i: True)


def test_unknown_node_error_comes_from_the_resolver():
    with pytest.raises(UsageError, match="unknown target"):
        node_overrides(parse_overrides(["nope=1"]), resolve, lambda i: True, lambda i: True)


def test_effective_batch():
    declared = size_setting(20)
    assert effective_batch(declared, None, None) == declared
    assert effective_batch(declared, ALL, None) == ALL
    assert effective_batch(declared, ALL, NONE) == NONE
    assert effective_batch(declared, None, size_setting(2)) == size_setting(2)
    assert effective_batch(None, ALL, None) is None  # never batched by an override


# --- how grouping is shown -----------------------------------------------------------------

@pytest.mark.parametrize("setting, text", [
    (None, None), (ALL, "batch=all"), (NONE, "batch=none"), (size_setting(20), "batch=20"),
    (groups_setting(NODE, GROUPS), "batches"), (labels_setting(3), "batches_by")])
def test_describe(setting, text):
    assert describe(setting) == text


def test_batch_plan_counts_calls_without_grouping_for_sizes():
    many = [f"k{i}" for i in range(45)]
    assert batch_plan(NODE, ALL, many).as_json() == {"grouping": "batch=all", "keys": 45,
                                                     "calls": 1}
    assert batch_plan(NODE, size_setting(20), many).calls == 3
    assert batch_plan(NODE, NONE, many).calls == 45
    assert batch_plan(NODE, ALL, []).calls == 0


def test_batch_plan_groups_listed_keys_and_says_null_beyond_them():
    setting = groups_setting(NODE, GROUPS)
    assert batch_plan(NODE, setting, KEYS).calls == 4  # two groups, r06 and r07 alone
    many = [f"k{i}" for i in range(LISTED + 1)]
    assert batch_plan(NODE, groups_setting(NODE, [many]), many).calls is None
    labels = {k: k[-1] for k in KEYS}
    assert batch_plan(NODE, labels_setting(), KEYS, labels).calls == 7
    assert batch_plan(NODE, labels_setting(), many).calls is None  # no labels needed


def test_batch_plan_still_checks_a_strict_miss_over_many_keys():
    many = [f"k{i}" for i in range(LISTED + 5)]
    with pytest.raises(UsageError, match="in no group"):
        batch_plan(NODE, groups_setting(NODE, [many[:3]], strict=True), many)
