"""Run hashes and their explainable parts.

A run hash is a blake2b digest over the canonical JSON of a tagged tuple, split in two levels
so that a tick over many keys hashes only what changed:

    context  = H("context", scheme, definition hash, sorted unkeyed parts)   once per node
    run_hash = H("run", context, key, digests of the key's own parts)        once per changed key

Unkeyed parts are the same for every key (an unpartitioned input, a sensor read whole, env
values); keyed parts differ per key (the same key of a `partitions_from` upstream, a keyed
source's value for this key).
"""

from __future__ import annotations

import hashlib
from typing import Any, Iterable

import orjson

SCHEME = 1
_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS


def digest(obj: Any) -> str:
    """blake2b-128 of the canonical JSON of `obj` (object keys sorted at every level)."""
    return hashlib.blake2b(orjson.dumps(obj, option=_SORTED), digest_size=16).hexdigest()


def context_digest(definition_hash: str, parts: dict[str, str]) -> str:
    return digest(("context", SCHEME, definition_hash, sorted(parts.items())))


def column_digest(keys: Any, hashes: Any) -> str:
    """Every key of a node with its hash, in key order (a collect() input), without unpacking."""
    h = hashlib.blake2b(digest_size=16)
    h.update(b"collect\0")
    for part in keys.json_parts():
        h.update(part)
    h.update(b"\0")
    for part in hashes.hex_parts():
        h.update(part)
    return h.hexdigest()


def value_digest(value: Any) -> str:
    """A keyed source's value for one key, as canonical JSON."""
    return digest(("value", value))


def run_hash(context: str, key: str, signature: Iterable[Any] | None, value_slots: tuple[int, ...]) -> str:
    """The cache key of one key of a node.

    `signature` holds the key's own parts in a fixed order; slots listed in `value_slots` are raw
    keyed-source values and are digested here, the others are already digests.
    """
    sig = list(signature or ())
    for slot in value_slots:
        sig[slot] = value_digest(sig[slot])
    return digest(("run", context, key, sig))
