"""The compiled sort-and-pack of a keyed source (barca.key_packing) gives the bytes the Python
path gives, and declines keys it does not take: a key source's digest and columns must not
depend on which path packed it (a project moved to a machine without a C compiler would
otherwise see every key change)."""

from __future__ import annotations

import string
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barca import key_packing
from barca.engine.worker import key_source
from barca.packed_columns import CHUNK
from barca.planner.keys import sorted_keys
from barca.store.local_store import LocalStore

PLAIN = "".join(c for c in map(chr, range(0x20, 0x7f)) if c not in '"\\')


def _plain(value) -> bool:
    """A value the compiled module packs itself (the rest it hands back as a list)."""
    if value is None or value is True or value is False:
        return True
    if type(value) is int:
        return -2**63 <= value < 2**63
    return type(value) is str and all(c in PLAIN for c in value)


def _python(value: dict, chunk: int):
    keys, order = sorted_keys(value)
    values = list(value.values())
    if order is not None:
        values = [values[i] for i in order]

    def cut(items):
        return tuple(orjson.dumps(items[i:i + chunk]) for i in range(0, len(items), chunk))

    return (cut(keys), None if order is None else cut(order),
            cut(values) if all(map(_plain, values)) else values)


# keys sharing long beginnings go through the radix passes' deeper windows (8 bytes each) and
# past 512 bytes to the comparison sort; 48 keys or more sharing one take the radix passes
_prefixes = st.sampled_from(["", "r", "retailer", "retailer_", "day=2026-12-0", "x" * 600])
_keys = st.builds(lambda p, rest: p + rest, _prefixes,
                  st.text(alphabet=st.sampled_from(PLAIN[:3] + PLAIN), max_size=20))
_plain_values = (st.integers(-2**63, 2**63 - 1) | st.none() | st.booleans() |
                 st.text(alphabet=st.sampled_from(PLAIN), max_size=12))
_values = _plain_values | st.integers() | st.text(max_size=3) | st.floats(allow_nan=False) | \
    st.lists(st.integers(), max_size=2)
_dicts = st.dictionaries(_keys, _values, max_size=300)
_plain_dicts = st.dictionaries(_keys, _plain_values, max_size=300)


@settings(max_examples=300, deadline=None)
@given(_dicts | _plain_dicts, st.sampled_from([1, 2, 7, CHUNK]), st.booleans())
def test_it_packs_what_python_packs(value: dict, chunk: int, presorted: bool) -> None:
    if presorted:
        value = dict(sorted(value.items()))
    assert key_packing.sort_and_pack(value, chunk) == _python(value, chunk)


@pytest.mark.parametrize("value, packed", [
    (-2**63, True), (2**63 - 1, True), (2**63, False), (-2**63 - 1, False), (0, True),
    ("", True), ("a b~", True), ("caf\u00e9", False), ('a"b', False), ("a\x7f", False),
    (1.0, False), (True, True), (None, True)])
def test_values_at_the_edges_are_packed_as_orjson_packs_them_or_handed_back(value,
                                                                          packed) -> None:
    keys, order, values = key_packing.sort_and_pack({"b": value, "a": 0}, CHUNK)
    if packed:
        assert values == (orjson.dumps([0, value]),)
    else:
        assert values == [0, value]


def test_a_short_key_sharing_its_beginning_with_many_longer_ones_is_packed_whole() -> None:
    # "abcdefgh" goes through a radix pass on the keys' second 8 bytes with the 60 keys that
    # extend it; that pass must not leave it packed from its (now empty) second 8 bytes
    keys = ["abcdefgh", "abcdefg"] + [f"abcdefgh{i:03d}" for i in range(60)]
    value = {key: i for i, key in enumerate(reversed(keys))}
    packed = key_packing.sort_and_pack(value, CHUNK)
    assert packed == _python(value, CHUNK)
    assert orjson.loads(packed[0][0])[:3] == ["abcdefg", "abcdefgh", "abcdefgh000"]


def _large(last_key: str = "z", last_value=0, shuffled: bool = True) -> dict:
    keys = [f"r{i:06d}" for i in range(12_000)] + [f"id{i}" for i in range(200)]
    keys.sort(key=(lambda k: hash(k) % 1009) if shuffled else None)
    value = {key: [f"v{i % 7}", i, None, True][i % 4] for i, key in enumerate(keys)}
    value[last_key] = last_value
    return value


@pytest.mark.parametrize("value", [_large(), _large(shuffled=False), _large(last_value=1.5),
                                   _large(last_value="caf\u00e9"), _large(last_value=2**64)],
                         ids=["shuffled", "in-order", "a-float", "non-ascii", "big-int"])
def test_a_large_dict_packed_by_two_threads_is_packed_as_python_packs_it(value) -> None:
    # from 8,192 keys a second thread reads and writes the keys while this one does the values
    assert key_packing.sort_and_pack(value, CHUNK) == _python(value, CHUNK)


@pytest.mark.parametrize("key", ["caf\u00e9", 'a"b', "a\x7fb"])
def test_a_large_dict_with_one_key_not_plain_is_declined(key) -> None:
    assert key_packing.sort_and_pack(_large(last_key=key), CHUNK) is None


def test_many_keys_with_one_long_beginning_sort_as_python_sorts() -> None:
    # 5,000 keys agreeing on their first 600 bytes, in reverse: the radix passes run to 512
    # bytes, then a comparison sort takes over
    value = {("x" * 600) + f"{i:05d}": i for i in reversed(range(5000))}
    assert key_packing.sort_and_pack(value, CHUNK) == _python(value, CHUNK)


@pytest.mark.parametrize("key", ["caf\u00e9", "\u4e2d", 'a"b', "a\\b", "a\nb", "a\x7fb", 3,
                                 ("a",)])
def test_it_declines_a_key_that_is_not_plain_ascii_text(key) -> None:
    assert key_packing.sort_and_pack({"a": 1, key: 2}, CHUNK) is None


def test_every_ascii_byte_at_every_place_of_a_key_is_taken_only_when_plain() -> None:
    # the check reads 8 bytes at a time, the rest padded: each byte at each place of keys
    # of 1 to 17 bytes
    for byte in map(chr, range(128)):
        for length in range(1, 18):
            for at in range(length):
                key = "k" * at + byte + "k" * (length - at - 1)
                packed = key_packing.sort_and_pack({key: 0}, CHUNK)
                assert (packed is not None) == (byte in PLAIN), (key, packed)


def test_it_declines_a_str_subclass_key() -> None:
    class Name(str):
        pass

    assert key_packing.sort_and_pack({"a": 1, Name("b"): 2}, CHUNK) is None


@pytest.mark.parametrize("of", [lambda i: f"v{i % 7}", lambda i: [None, i, True][i % 3],
                                lambda i: i / 7])
def test_a_key_source_is_written_the_same_without_the_compiled_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, of) -> None:
    value = {f"r{i:06d}": of(i) for i in reversed(range(10_000))}
    store = LocalStore(tmp_path, str(tmp_path))
    compiled = key_source.write_key_source(value, store, "a/v.json", ((), (), ()))
    monkeypatch.setattr(key_source, "key_packing", None)
    python = key_source.write_key_source(value, store, "b/v.json", ((), (), ()))
    assert compiled == python
    assert (tmp_path / "a" / "v.json").read_bytes() == (tmp_path / "b" / "v.json").read_bytes()
