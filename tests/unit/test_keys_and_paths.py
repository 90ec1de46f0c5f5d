"""Partition keys (barca.planner.keys) and where a key's artifacts live (barca.store.paths).

Keys are raw inside barca and become labels (`dim=value`) only when shown; a key's directory
name must be a single safe path component that no other key of the node shares.
"""

from __future__ import annotations

import itertools

import pytest

from barca.discover.model import Definition, DimensionSpec
from barca.planner.keys import (in_declared_order, key_args, key_label, key_of_label, key_text,
                                keys_from_value, static_keys)

from barca.planner.keys import key_pairs
from barca.store.paths import artifact_file, escape, node_dir_name


def definition(*dimensions: DimensionSpec, name: str = "sales") -> Definition:
    return Definition(
        node_id=f"p.py:{name}", name=name, function=name, file="p.py", line=1, kind="asset",
        params=(), annotations=(), inputs=(), dimensions=tuple(dimensions), freshness="manual",
        schedule=None, serializer=None, retries=0, retry_backoff=0.0, timeout_seconds=0.0,
        env=(), cutoff=False, weight=1, batch=None, description=None, tags=(),
        definition_hash="0" * 32, hash_parts=())


UNPARTITIONED = definition()
ONE_DIM = definition(DimensionSpec("retailer", "static", keys=("r1", "r2")))
TWO_DIMS = definition(DimensionSpec("region", "static", keys=("emea", "amer")),
                      DimensionSpec("day", "static", keys=("2026-01-02", "2026-01-01")))


# --- labels and arguments ------------------------------------------------------------------

def test_one_dimension_key_label_is_dim_equals_key():
    assert key_label(ONE_DIM, "r1") == "retailer=r1"
    assert key_label(ONE_DIM, "a=b,c") == "retailer=a=b,c"


def test_multi_dimension_key_is_the_json_list_of_values_and_its_label_joins_dim_value():
    assert key_label(TWO_DIMS, '["1","emea"]') == "day=1,region=emea"
    assert key_label(UNPARTITIONED, "") == ""


def test_a_label_names_its_key_back():
    """What the server's `?key=` reads: the label every answer writes, back to the key."""
    assert key_of_label(["retailer"], "retailer=r1") == "r1"
    assert key_of_label(["retailer"], "retailer=a=b,c") == "a=b,c"
    assert key_of_label(["day", "region"], "day=1,region=emea") == '["1","emea"]'
    assert key_of_label(["day", "region"], "day=a,b,region=x=y") == '["a,b","x=y"]'
    for dims, key in ((["retailer"], "r1"), (["day", "region"], '["2026-01-01","emea"]')):
        assert key_of_label(dims, key_label(TWO_DIMS if len(dims) == 2 else ONE_DIM, key)) \
            == key


def test_what_is_no_label_of_the_dimensions_names_no_key():
    assert key_of_label(["retailer"], "r1") is None
    assert key_of_label(["day", "region"], "region=emea,day=1") is None  # not in name order
    assert key_of_label(["day", "region"], "day=1") is None
    assert key_of_label(["day", "region"], '["1","emea"]') is None
    assert key_of_label([], "") is None


def test_key_args_give_each_dimension_its_value():
    assert key_args(UNPARTITIONED, "") == {}
    assert key_args(ONE_DIM, "r1") == {"retailer": "r1"}
    assert key_args(ONE_DIM, "a,b=c") == {"retailer": "a,b=c"}
    assert key_args(TWO_DIMS, '["2026-01-01","emea"]') == \
        {"day": "2026-01-01", "region": "emea"}


def test_key_args_keep_commas_and_equals_inside_a_multi_dimension_value():
    assert key_args(TWO_DIMS, '["1","a,b"]') == {"day": "1", "region": "a,b"}
    assert key_args(TWO_DIMS, '["x,region=y","emea"]') == {"day": "x,region=y", "region": "emea"}


# --- which keys ----------------------------------------------------------------------------

def test_static_keys_of_one_dimension_keep_declared_order():
    assert static_keys(definition(DimensionSpec("n", "static", keys=("3", "1", "2"))), {}) == \
        ["3", "1", "2"]


def test_static_keys_of_several_dimensions_are_the_cross_product_ordered_by_dimension_name():
    """`region` is declared first, but `day` sorts first: it is the outer loop and the label
    starts with it; each dimension's values keep their declared order."""
    assert [key_label(TWO_DIMS, k) for k in static_keys(TWO_DIMS, {})] == [
        "day=2026-01-02,region=emea", "day=2026-01-02,region=amer",
        "day=2026-01-01,region=emea", "day=2026-01-01,region=amer",
    ]


def test_static_keys_of_three_dimensions_have_every_combination_once():
    d = definition(DimensionSpec("c", "static", keys=("1", "2")),
                   DimensionSpec("a", "static", keys=("x", "y", "z")),
                   DimensionSpec("b", "static", keys=("p",)))
    keys = static_keys(d, {})

    labels = [key_label(d, k) for k in keys]
    assert labels == [f"a={a},b=p,c={c}" for a in "xyz" for c in "12"]
    assert len(set(keys)) == 6
    assert all(key_args(d, k) == dict(p.split("=") for p in key_label(d, k).split(","))
               for k in keys)


def test_expression_dimension_keys_come_from_the_evaluated_expressions():
    d = definition(DimensionSpec("day", "expr", expr="days()"),
                   DimensionSpec("region", "static", keys=("emea",)))
    assert [key_label(d, k) for k in static_keys(d, {("p.py:sales", "day"): ("d2", "d1")})] == \
        ["day=d2,region=emea", "day=d1,region=emea"]


def test_keys_from_a_dict_are_its_keys_sorted_with_each_keys_value_and_the_dicts_order():
    value = {"r2": {"v": 2}, "r1": {"v": 1}, "r3": {"v": 3}}
    keys, values, order = keys_from_value(value)

    assert keys == ["r1", "r2", "r3"]
    assert values == value
    assert order == [1, 0, 2]  # r1 is second in the dict, r2 first, r3 third
    assert [keys[i] for i in in_declared_order(range(3), order)] == ["r2", "r1", "r3"]
    assert keys_from_value({"a": 1, "b": 2})[2] is None  # a sorted dict needs no order


def test_keys_from_a_list_or_tuple_are_text_in_order_without_values():
    assert keys_from_value(["b", 1, "a", -7]) == (["b", "1", "a", "-7"], None, None)
    assert keys_from_value(("x", "y")) == (["x", "y"], None, None)
    assert keys_from_value([]) == ([], None, None)


@pytest.mark.parametrize("bad", [[True], [1.5], [None], [("a",)]])
def test_keys_from_a_list_refuse_values_that_are_not_str_or_int(bad):
    with pytest.raises(TypeError):
        keys_from_value(bad)


@pytest.mark.parametrize("bad", [{"a", "b"}, "abc", 3, None])
def test_keys_from_value_refuse_anything_but_a_list_or_dict(bad):
    with pytest.raises(TypeError):
        keys_from_value(bad)


def test_key_text_writes_ints_in_decimal_and_keeps_str():
    assert [key_text(v) for v in ("r1", 0, 42, -3, "")] == ["r1", "0", "42", "-3", ""]


# --- directory names -----------------------------------------------------------------------

LONG_PREFIX = "p" * 250
TRICKY = [
    "", " ", "  ", "/", "//", "\\", ".", "..", "...", "./", "../..", "a/../b", "%", "%25", "%2F",
    "a b", "a%20b", "a_b", "a-b", "a.b", "A", "a", "é", "e\u0301", "日本", "🙂", "\x00", "\n",
    "\t", "\x7f", "a\x00b", ":", "*", "?", "<>|\"", "~", "~1", "=", "a=b", "-", "-rf", "CON",
    "x" * 300, "x" * 301, "é" * 150, LONG_PREFIX + "a", LONG_PREFIX + "b", LONG_PREFIX + "ab",
    LONG_PREFIX + "/", LONG_PREFIX + "..", LONG_PREFIX,
]


def test_escape_is_injective_over_tricky_strings():
    escaped = [escape(t) for t in TRICKY]
    assert len(set(escaped)) == len(set(TRICKY))


def test_escape_is_injective_over_all_short_strings_of_a_tricky_alphabet():
    alphabet = ["a", "%", "2", "F", "/", ".", " ", "é", "_", "\x00"]
    texts = ["".join(p) for n in range(4) for p in itertools.product(alphabet, repeat=n)]
    assert len({escape(t) for t in texts}) == len(texts)


def test_escape_keeps_only_safe_characters():
    safe = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_%")
    for text in TRICKY:
        assert set(escape(text)) <= safe, text


def test_escape_writes_unsafe_bytes_as_percent_hex():
    assert escape("r/1 é") == "r%2F1%20%C3%A9"
    assert escape("%") == "%25"


@pytest.mark.parametrize("text", [".", ".."])
def test_escape_never_returns_a_dot_name_on_its_own(text):
    assert escape(text) not in (".", "..")


def labels_of(keys: list[str]) -> list:
    """(dimension, value) pairs as the coordinator passes them to artifact_file."""
    return [key_pairs(ONE_DIM, k) for k in keys]


RUN_HASH = "0123456789abcdef" * 2


def artifact(file: str, name: str, pairs) -> str:
    """The root-relative artifact of a key, with the longest extension."""
    return artifact_file("a", file, name, pairs, RUN_HASH, "parquet")[2:]


@pytest.mark.parametrize("file", ["p.py", "sub/dir/p.py"])
def test_a_key_file_sits_in_its_node_directory_and_never_holds_a_separator_or_dot_name(file):
    for label in labels_of(TRICKY):
        path = artifact(file, "sales", label)
        directory, leaf = path.rsplit("/", 1)
        assert directory == f"{file}--sales", (label, path)
        assert leaf.endswith(f".{RUN_HASH}.parquet"), (label, path)
        assert "\\" not in leaf and "\x00" not in leaf and not leaf.startswith("."), label


@pytest.mark.parametrize("file", ["p.py", "sub/dir/p.py"])
def test_path_components_stay_within_255_bytes(file):
    for label in labels_of(TRICKY) + labels_of(["x" * 5000, "é" * 3000]):
        for component in artifact(file, "sales", label).split("/"):
            assert 0 < len(component.encode("utf-8")) <= 255, (label, component)
            assert component not in (".", "..")


def test_different_keys_never_share_a_file():
    keys = TRICKY + [LONG_PREFIX + c for c in "abcdefgh"] + ["y" * n for n in range(195, 215)]
    paths = [artifact("p.py", "sales", label) for label in labels_of(keys)]
    assert len(set(paths)) == len(set(keys))


def test_long_keys_sharing_a_250_byte_prefix_get_different_files():
    a = artifact("p.py", "sales", key_pairs(ONE_DIM, LONG_PREFIX + "a"))
    b = artifact("p.py", "sales", key_pairs(ONE_DIM, LONG_PREFIX + "b"))
    assert a != b
    assert all(len(c.encode()) <= 255 for c in a.split("/") + b.split("/"))


def test_multi_dimension_labels_get_different_files():
    import orjson

    values = [["1", "a,b"], ["1", "a"], ["1,region=a", "b"], ["1_region_x", "y"],
              ["1", "x_region_y"], ["1", "a,day=2"]]
    keys = static_keys(TWO_DIMS, {}) + [orjson.dumps(v).decode() for v in values]
    paths = [artifact("p.py", "sales", key_pairs(TWO_DIMS, key)) for key in keys]
    assert len(set(paths)) == len(set(keys))


def test_keys_containing_comma_identifier_equals_get_their_own_file():
    a = artifact("p.py", "sales", key_pairs(ONE_DIM, "a,y=b"))
    b = artifact("p.py", "sales", key_pairs(ONE_DIM, "a_y_b"))
    assert a != b


def test_a_long_non_ascii_node_name_keeps_its_directory_within_255_bytes():
    assert len(node_dir_name("p.py", "销售" * 100).encode("utf-8")) <= 255
    assert node_dir_name("p.py", "销售" * 100) != node_dir_name("p.py", "销售" * 101)
    path = artifact("p.py", "销售" * 100, key_pairs(ONE_DIM, "k" * 300))
    assert all(len(c.encode()) <= 255 for c in path.split("/"))


def test_artifact_file_is_the_node_directory_then_key_run_hash_and_extension():
    assert artifact_file("a", "sub/p.py", "sales", key_pairs(ONE_DIM, "r/1"), "abc123",
                         "pickle") == "a/sub/p.py--sales/retailer_r%2F1.abc123.pkl"
    assert artifact_file("a", "p.py", "sales", (), "abc123", "json") == "a/p.py--sales/abc123.json"
