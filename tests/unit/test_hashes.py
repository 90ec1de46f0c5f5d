"""Run hashes (barca.planner.hashes): canonical, tagged, and sensitive to exactly their parts.

A hash never depends on dict order; the same context, key and parts always give the same run
hash, and changing any one of them gives another.
"""

from __future__ import annotations

import re

import pytest

from barca.planner.hashes import context_digest, digest, run_hash, value_digest

CTX = context_digest("def-hash", {"input p.py:a": "h-a"})


def test_digest_is_128_bit_hex():
    h = digest(("x", 1))
    assert re.fullmatch("[0-9a-f]{32}", h)
    assert digest(("x", 2)) != h


def test_digest_does_not_depend_on_dict_order_at_any_depth():
    a = {"a": 1, "b": {"x": [1, {"p": 1, "q": 2}], "y": None}, "c": "s"}
    b = {"c": "s", "b": {"y": None, "x": [1, {"q": 2, "p": 1}]}, "a": 1}
    assert digest(a) == digest(b)
    assert digest(("tag", a)) == digest(("tag", b))


def test_digest_is_the_same_across_calls_for_equal_values():
    assert digest({"k": [1, 2, 3]}) == digest({"k": [1, 2, 3]})
    assert digest(("run", "c", "k", [])) == digest(["run", "c", "k", []])  # tuple = list


@pytest.mark.parametrize("a, b", [
    ([1, 2], [2, 1]),
    ("1", 1),
    (1, 1.5),
    (None, "null"),
    ({"a": 1}, {"a": 2}),
    (("run", "x"), ("context", "x")),
    ([], [None]),
])
def test_digest_tells_different_values_apart(a, b):
    assert digest(a) != digest(b)


def test_context_digest_does_not_depend_on_parts_dict_order():
    assert context_digest("d", {"a": "1", "b": "2"}) == context_digest("d", {"b": "2", "a": "1"})


def test_context_digest_changes_with_definition_hash_and_each_part():
    base = context_digest("d", {"a": "1", "b": "2"})
    assert context_digest("d2", {"a": "1", "b": "2"}) != base
    assert context_digest("d", {"a": "1", "b": "3"}) != base
    assert context_digest("d", {"a": "1"}) != base
    assert context_digest("d", {"a": "1", "b": "2", "c": "3"}) != base


def test_run_hash_changes_with_context_key_and_signature():
    base = run_hash(CTX, "r1", ["h-up"], ())
    assert run_hash(CTX, "r1", ["h-up"], ()) == base
    assert run_hash(context_digest("other", {}), "r1", ["h-up"], ()) != base
    assert run_hash(CTX, "r2", ["h-up"], ()) != base
    assert run_hash(CTX, "r1", ["h-up2"], ()) != base
    assert run_hash(CTX, "r1", [], ()) != base


def test_run_hash_of_no_signature_equals_an_empty_one():
    assert run_hash(CTX, "", None, ()) == run_hash(CTX, "", [], ())


def test_run_hash_tells_key_from_signature_apart():
    assert run_hash(CTX, "a", ["b"], ()) != run_hash(CTX, "b", ["a"], ())
    assert run_hash(CTX, "", ["a"], ()) != run_hash(CTX, "a", [], ())


def test_run_hash_depends_on_the_order_of_signature_slots():
    assert run_hash(CTX, "k", ["x", "y"], ()) != run_hash(CTX, "k", ["y", "x"], ())


def test_value_slot_is_digested_canonically_so_dict_order_does_not_matter():
    a = {"version": 3, "meta": {"x": 1, "y": [1, 2]}}
    b = {"meta": {"y": [1, 2], "x": 1}, "version": 3}
    assert run_hash(CTX, "r1", [a], (0,)) == run_hash(CTX, "r1", [b], (0,))
    assert run_hash(CTX, "r1", ["h-up", a], (1,)) == run_hash(CTX, "r1", ["h-up", b], (1,))


def test_value_slot_changes_the_run_hash_when_the_value_changes():
    assert run_hash(CTX, "r1", [{"v": 1}], (0,)) != run_hash(CTX, "r1", [{"v": 2}], (0,))
    assert run_hash(CTX, "r1", [1], (0,)) != run_hash(CTX, "r1", ["1"], (0,))


def test_value_slot_is_hashed_as_its_value_digest():
    value = {"b": 2, "a": 1}
    assert run_hash(CTX, "r1", ["h-up", value], (1,)) == \
        run_hash(CTX, "r1", ["h-up", value_digest({"a": 1, "b": 2})], ())


def test_value_slot_differs_from_the_same_text_in_a_digest_slot():
    """A raw value "h" and a part digest "h" are different things and must not collide."""
    assert run_hash(CTX, "r1", ["h"], (0,)) != run_hash(CTX, "r1", ["h"], ())


def test_run_hash_does_not_modify_the_signature_it_is_given():
    signature = ["h-up", {"b": 2, "a": 1}]
    run_hash(CTX, "r1", signature, (1,))
    assert signature == ["h-up", {"b": 2, "a": 1}]
