"""Which partition keys a node has: static lists, evaluated expressions, or another node's keys.

Key text is `dim=value`, dimensions joined by `,` in dimension-name order; several dimensions
give their cross product, ordered by dimension name, each dimension's values in declared order.
"""

from __future__ import annotations

import itertools
from typing import Any, Mapping, Sequence

from barca.discover.model import Definition


class KeysUnknown(Exception):
    """The keys come from a node whose output is not known yet."""


def key_text(value: Any) -> str:
    """A key value as text: str as is, int as its decimal form."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"partition key {value!r} is a {type(value).__name__}; use str or int")
    return value if isinstance(value, str) else str(value)


def static_keys(d: Definition, expr_keys: Mapping[tuple[str, str], Sequence[str]]) -> tuple[str, ...]:
    """Cross product of `partitions([...])` dimensions, dimensions sorted by name."""
    dims = sorted(d.dimensions, key=lambda x: x.name)
    columns = []
    for dim in dims:
        values = dim.keys if dim.kind == "static" else expr_keys[(d.node_id, dim.name)]
        columns.append([f"{dim.name}={v}" for v in values])
    if len(columns) == 1:
        return tuple(columns[0])
    return tuple(",".join(combo) for combo in itertools.product(*columns))


def keys_from_value(dim: str, value: Any) -> tuple[tuple[str, ...], dict[str, Any] | None]:
    """Keys from a list or dict source; for a dict also key -> that key's value."""
    if isinstance(value, dict):
        values = {f"{dim}={key_text(k)}": v for k, v in value.items()}
        return tuple(values), values
    if isinstance(value, (list, tuple)):
        return tuple(f"{dim}={key_text(v)}" for v in value), None
    raise TypeError(f"a partitions_from source must return a list or a dict, "
                    f"not {type(value).__name__}")


def split_key(key: str) -> dict[str, str]:
    """`region=emea,day=1` -> {"region": "emea", "day": "1"} (dimension names never hold , or =)."""
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
