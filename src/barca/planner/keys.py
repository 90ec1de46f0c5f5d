"""Which partition keys a node has, and how a key is written.

Keys are kept raw inside barca: a one-dimension key is its value (`"r000001"`), a key of
several dimensions is the JSON list of its values in dimension-name order (`["1","emea"]`,
unambiguous whatever the values hold), an unpartitioned node has the single key `""`. Users
see labels, `dim=value` joined by `,` in dimension-name order, built only when shown.
Several dimensions give their cross product, ordered by dimension name, values in declared order.
"""

from __future__ import annotations

import itertools
import operator

import orjson
from typing import Any, Iterable, Iterator, Mapping, Sequence

from barca.discover.model import Definition
from barca.packed_columns import CHUNK, JsonColumn


def key_text(value: Any) -> str:
    """A key value as text: str as is, int as its decimal form."""
    if value.__class__ is str:
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"partition key {value!r} is a {type(value).__name__}; use str or int")
    return str(value)


def dimension_names(d: Definition) -> list[str]:
    return sorted(dim.name for dim in d.dimensions)


def label_of(dims: Sequence[str], key: str) -> str:
    """The text users see: `retailer=r1`, or `day=1,region=emea` for several dimensions."""
    if not dims:
        return key
    if len(dims) == 1:
        return f"{dims[0]}={key}"
    return ",".join(f"{n}={v}" for n, v in zip(dims, orjson.loads(key)))


def labels_of(dims: Sequence[str], keys: Iterable[str]) -> Iterator[str]:
    """`label_of` of each key; with one dimension without a call per key (200,000 labels
    for `get -o path` cost 30 ms less)."""
    if len(dims) == 1:
        prefix = f"{dims[0]}="
        return (prefix + key for key in keys)
    return (label_of(dims, key) for key in keys)


def key_of_label(dims: Sequence[str], text: str) -> str | None:
    """The key whose label (`label_of`) is `text`, None when `text` is no label of these
    dimensions (sorted names): `retailer=r1` is `r1`, `day=1,region=emea` is `["1","emea"]`."""
    if len(dims) == 1:
        prefix = f"{dims[0]}="
        return text[len(prefix):] if text.startswith(prefix) else None
    if not dims or not text.startswith(f"{dims[0]}="):
        return None
    values, rest = [], text[len(dims[0]) + 1:]
    for name in dims[1:]:
        cut = rest.find(f",{name}=")
        if cut < 0:
            return None
        values.append(rest[:cut])
        rest = rest[cut + len(name) + 2:]
    key = orjson.dumps([*values, rest]).decode()
    return key if label_of(dims, key) == text else None


def label_order(dims: Sequence[str], keys: Sequence[str]) -> list[int] | None:
    """Positions of `keys` sorted by their labels: the order `collect()` hands a reader its
    list in (and `barca get` lists a partitioned value in), so that reordering a key list
    changes neither the list nor a hash. None when `keys` are in that order already, which
    is found in one pass in C; one dimension sorts by the raw key (its labels share a prefix)."""
    items = list(keys)
    text = items if len(dims) <= 1 else [label_of(dims, k) for k in items]
    if all(map(operator.le, text, itertools.islice(text, 1, None))):
        return None
    return sorted(range(len(text)), key=text.__getitem__)


def key_label(d: Definition, key: str) -> str:
    return label_of(dimension_names(d), key)


def key_args(d: Definition, key: str) -> dict[str, str]:
    """The keyword arguments a key gives the function: dimension name -> value."""
    if not d.dimensions:
        return {}
    if len(d.dimensions) == 1:
        return {d.dimensions[0].name: key}
    return dict(zip(dimension_names(d), orjson.loads(key)))


def key_pairs(d: Definition, key: str) -> tuple[tuple[str, str], ...]:
    """(dimension, value) pairs of a key, sorted by dimension: what names its directory."""
    return tuple(sorted(key_args(d, key).items()))


def static_keys(d: Definition, expr_keys: Mapping[tuple[str, str], Sequence[str]]) -> list[str]:
    """Keys of `partitions([...])` dimensions (their cross product when several)."""
    dims = sorted(d.dimensions, key=lambda x: x.name)
    columns = []
    for dim in dims:
        values = dim.keys if dim.kind == "static" else expr_keys[(d.node_id, dim.name)]
        columns.append(list(values))
    if len(columns) == 1:
        return columns[0]
    return [orjson.dumps(list(combo)).decode() for combo in itertools.product(*columns)]


def keys_from_value(value: Any) -> tuple[list[str], dict[str, Any] | None, list[int] | None]:
    """Keys from a list source in its order; a dict source's keys sorted (a dict built from a
    query's rows comes in any order, which must not change a hash nor make a tick compare
    key by key), with each key's value and the dict's own order (`sorted_keys`)."""
    if isinstance(value, dict):
        by_text = value if not value or set(map(type, value)) == {str} else {
            key_text(k): v for k, v in value.items()}
        keys, order = sorted_keys(by_text)
        return keys, by_text, order
    if isinstance(value, (list, tuple)):
        return [key_text(v) for v in value], None, None
    raise TypeError(f"a partitions_from source must return a list or a dict, "
                    f"not {type(value).__name__}")


def sorted_keys(declared: Iterable[str]) -> tuple[list[str], list[int] | None]:
    """The keys sorted, with each one's position in the declared order (the dict's own: the
    order keys are batched, listed and run in), None when that is sorted already. A keyed
    source's keys are kept sorted so that a dict's order changes nothing a tick compares.
    Passes in C only: a sorted dict (the usual case) costs one pass, another one sort of
    positions. Keys that do not compare (str and int mixed) raise TypeError."""
    keys = list(declared)
    if all(map(operator.le, keys, itertools.islice(keys, 1, None))):
        return keys, None
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return list(operator.itemgetter(*order)(keys)), order  # unsorted: two keys at least


def in_declared_order(positions: Iterable[int], order: Sequence[int] | None) -> tuple[int, ...]:
    """Positions of a node's keys (sorted keys for a keyed source) in declared order."""
    if order is None:
        return tuple(sorted(positions))
    positions = list(positions)
    if isinstance(order, JsonColumn) and len(positions) > CHUNK:
        order = order.items  # many keys: unpack once rather than item by item
    return tuple(sorted(positions, key=order.__getitem__))
