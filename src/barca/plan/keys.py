"""Which partition keys a node has, and how a key is written.

Keys are kept raw inside barca: a one-dimension key is its value (`"r000001"`), a key of
several dimensions is the text `a=1,b=2` (dimension-name order), an unpartitioned node has the
single key `""`. Users see labels, `dim=value`, built only when shown.
Several dimensions give their cross product, ordered by dimension name, values in declared order.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from barca.discover.model import Definition


def key_text(value: Any) -> str:
    """A key value as text: str as is, int as its decimal form."""
    if value.__class__ is str:
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"partition key {value!r} is a {type(value).__name__}; use str or int")
    return str(value)


def dimension_names(d: Definition) -> list[str]:
    return sorted(dim.name for dim in d.dimensions)


def key_label(d: Definition, key: str) -> str:
    """`r1` -> `retailer=r1` for a one-dimension node; other keys are already labels."""
    if len(d.dimensions) == 1:
        return f"{d.dimensions[0].name}={key}"
    return key


def key_args(d: Definition, key: str) -> dict[str, str]:
    """The keyword arguments a key gives the function: dimension name -> value."""
    if not d.dimensions:
        return {}
    if len(d.dimensions) == 1:
        return {d.dimensions[0].name: key}
    return split_label(key)


def key_pairs(d: Definition, key: str) -> tuple[tuple[str, str], ...]:
    """(dimension, value) pairs of a key, sorted by dimension: what names its directory."""
    return tuple(sorted(key_args(d, key).items()))


def parse_label(d: Definition, label: str) -> str:
    """The inverse of key_label: `retailer=r1` -> `r1`."""
    if len(d.dimensions) == 1:
        prefix = d.dimensions[0].name + "="
        return label[len(prefix):] if label.startswith(prefix) else label
    return label


def static_keys(d: Definition, expr_keys: Mapping[tuple[str, str], Sequence[str]]) -> list[str]:
    """Keys of `partitions([...])` dimensions (their cross product when several)."""
    dims = sorted(d.dimensions, key=lambda x: x.name)
    columns = []
    for dim in dims:
        values = dim.keys if dim.kind == "static" else expr_keys[(d.node_id, dim.name)]
        columns.append(list(values))
    if len(columns) == 1:
        return columns[0]
    names = [dim.name for dim in dims]
    return [",".join(f"{n}={v}" for n, v in zip(names, combo))
            for combo in itertools.product(*columns)]


def keys_from_value(value: Any) -> tuple[list[str], dict[str, Any] | None]:
    """Keys from a list or dict source; for a dict also key -> that key's value."""
    if isinstance(value, dict):  # read back from JSON: its keys are already str
        return list(value), value
    if isinstance(value, (list, tuple)):
        return [key_text(v) for v in value], None
    raise TypeError(f"a partitions_from source must return a list or a dict, "
                    f"not {type(value).__name__}")


def split_label(key: str) -> dict[str, str]:
    """`region=emea,day=1` -> {"region": "emea", "day": "1"} (dimension names hold no , or =)."""
    out: dict[str, str] = {}
    dim = None
    for piece in key.split(","):
        name, sep, value = piece.partition("=")
        if sep and name.isidentifier():
            dim = name
            out[dim] = value
        elif dim is not None:
            out[dim] += "," + piece
    return out
