"""A keyed source's value in the worker: checked, written and packed for the coordinator.

A sensor over 200,000 keys runs on every tick, so each pass over its dict shows in the tick's
time. A dict is sorted by key once and its keys and values packed in chunks; the packing checks
that they are JSON. Keys of plain ASCII text (most are) are sorted and packed in C
(barca.key_packing: a quarter of Python's time at 200,000 keys), and so are values of plain
ASCII text, ints, None and booleans; others in Python, to the same bytes. The dict's own order
(its declared key order: keys are batched, listed and run in it) travels beside them as each
sorted key's position in the dict, only when that is not the sorted order, and is no part of
the digest. The file (keyed-json) is written from those chunks by threads that let go of the
GIL while they write: the keys and the order while the values are packed (when Python packs
them), the values while the chunks are hashed. The digest recorded for it (SHA-256, cut to
barca's 128 bits) is taken over the keys' and values' chunk digests, so a query that returns
its rows in another order changes nothing downstream. Only the chunks the coordinator does not
have already are sent (see barca.store.key_source_chunks).
"""
from __future__ import annotations

import hashlib
import math
import operator
from collections import Counter
from typing import Any, Iterable, Iterator, Sequence

from barca.packed_columns import CHUNK, HASH_WIDTH, chunk_digest, pack_chunks
from barca.engine.protocol import Known, PackedColumns
from barca.planner.keys import key_text, sorted_keys
from barca.store.artifact_store import ArtifactStore
from barca.store.artifacts import SerializeError, encode_json, write_result
from barca.store.keyed_json_writer import KeyedJsonWriter

try:
    from barca import key_packing
except ImportError:  # built without a C compiler: packed in Python, the same bytes
    key_packing = None


class KeySourceError(Exception):
    """A partitions_from source returned something that cannot define keys."""


def write_key_source(value: Any, store: ArtifactStore, key: str, known: Known,
                     leave: list[Any] | None = None) -> tuple[str, int, str, PackedColumns]:
    """Write a key source's value as `key` in `store`; returns (format, size, digest, its keys
    and values packed). `known` holds the digests of the chunks the coordinator has: those are
    not sent again. The lists made to pack a dict go into `leave`, for the caller to free
    once the outcome is sent (200,000 positions take milliseconds to free)."""
    if isinstance(value, (list, tuple)):
        keys = [key_text(_checked_key(item)) for item in value]
        if len(set(keys)) != len(keys):
            twice = next(k for k, n in Counter(keys).items() if n > 1)
            raise KeySourceError(f"key {twice!r} appears twice in the list; each key must "
                                 "appear once")
        try:
            size, digest = write_result(store, key, value, "json")
        except SerializeError:
            raise _not_text(next(k for k in keys if encode_json(k) is None)) from None
        return "json", size, digest, _packed(len(keys), pack_chunks(keys), None, None, known)[0]
    if not isinstance(value, dict):
        raise KeySourceError(f"a partitions_from source must return a list or a dict, not "
                             f"{type(value).__name__}")
    return _write_dict(value, store, key, known, [] if leave is None else leave, checked=False)


def _write_dict(value: dict, store: ArtifactStore, key: str, known: Known, leave: list[Any],
                checked: bool) -> tuple[str, int, str, PackedColumns]:
    """Sort, pack and write; the file is written in threads while the values are packed and
    the chunks hashed. A key that is not a str, or a value that JSON would not give back as it
    is, sends the dict through `_text_keys` once, which converts int keys or names the key."""
    try:
        columns = _sorted_columns(value, leave)
        if columns is not None:
            count, key_chunks, order_chunks, values = columns
            writer = KeyedJsonWriter(store, key, key_chunks, order_chunks)
            try:
                value_chunks = tuple(values)
            except BaseException:
                writer.abort()
                raise
    except TypeError:
        if checked:
            raise
        columns = None
    if columns is None:
        return _write_dict(_text_keys(value), store, key, known, leave, checked=True)
    writer.finish(value_chunks)
    packed, digests = _packed(count, key_chunks, value_chunks, order_chunks, known)
    return "keyed-json", writer.close(), hashlib.sha256(digests).hexdigest()[:HASH_WIDTH], packed


def _sorted_columns(value: dict, leave: list[Any]) -> tuple[
        int, tuple[bytes, ...], tuple[bytes, ...] | None, Iterable[bytes]] | None:
    """The key count, the sorted keys' chunks, the order's (None: the dict is sorted) and the
    values' chunks in key order (packed as they are iterated, when not packed already); None
    unless every key is a str. Compiled (barca.key_packing) for keys of plain ASCII, which is
    most, and values of plain ASCII, ints, None and booleans; the same bytes in Python."""
    if key_packing is not None and value.__class__ is dict:
        packed = key_packing.sort_and_pack(value, CHUNK)
        if packed is not None:
            key_chunks, order_chunks, values = packed
            if isinstance(values, tuple):  # packed
                return len(value), key_chunks, order_chunks, values
            leave.append(values)
            return len(values), key_chunks, order_chunks, map(_strict_chunk, _runs(values))
    sort = _str_keys_sorted(value)
    if sort is None:
        return None
    keys, order = sort
    leave += sort
    return (len(keys), tuple(map(_strict_chunk, _runs(keys))),
            None if order is None else pack_chunks(order),
            map(_strict_chunk, _value_runs(value, order)))


def _str_keys_sorted(value: dict) -> tuple[list[str], list[int] | None] | None:
    """The keys sorted and the dict's order (planner.keys.sorted_keys), or None unless every
    key is a str."""
    try:
        keys, order = sorted_keys(value)  # keys of mixed types do not sort
    except TypeError:
        return None
    if keys and keys[0].__class__ is not str:  # they all sort with a str, so all are str
        return None
    return keys, order


def _runs(items: list[Any]) -> Iterator[list[Any]]:
    return (items[start:start + CHUNK] for start in range(0, len(items), CHUNK))


def _value_runs(value: dict, order: list[int] | None) -> Iterator[Sequence[Any]]:
    """The values of each run of CHUNK sorted keys, taken from the dict's values in its own
    order by each key's position there (`order`; None: the dict is sorted): a list index each
    rather than a lookup of each key (a third of the time at 200,000 keys). A chunk at a time,
    the values just taken are still in the CPU's cache when they are packed, and the writer
    thread can take the GIL between chunks."""
    values = list(value.values())
    if order is None:
        return _runs(values)
    return (operator.itemgetter(*run)(values) if len(run) > 1 else [values[run[0]]]
            for run in _runs(order))


def _strict_chunk(items: Sequence[Any]) -> bytes:
    """pack_chunks' bytes for one chunk, refusing (TypeError) what JSON would not give back
    as it is: datetimes, dataclasses, subclasses of str and int, NaN and infinity."""
    chunk = encode_json(items, sort_keys=True)
    if chunk is None:
        raise TypeError("not JSON as it is")
    return chunk


def _packed(count: int, keys: tuple[bytes, ...], values: tuple[bytes, ...] | None,
            order: tuple[bytes, ...] | None, known: Known) -> tuple[PackedColumns, bytes]:
    """The columns with each chunk the coordinator already has left out (None), and the keys'
    and values' chunk digests joined (what the whole value's digest is taken over: the dict's
    order is not part of it)."""
    key_digests = tuple(map(chunk_digest, keys))
    value_digests = tuple(map(chunk_digest, values)) if values is not None else ()
    order_digests = tuple(map(chunk_digest, order)) if order is not None else ()
    packed = PackedColumns(count, _unknown(keys, key_digests, known[0]),
                           None if values is None else _unknown(values, value_digests, known[1]),
                           key_digests, value_digests,
                           None if order is None else _unknown(order, order_digests, known[2]),
                           order_digests)
    return packed, b"".join(key_digests + value_digests)


def _unknown(chunks: tuple[bytes, ...], digests: tuple[bytes, ...],
             told: tuple[bytes, ...]) -> tuple[bytes | None, ...]:
    return tuple(None if i < len(told) and digest == told[i] else chunk
                 for i, (chunk, digest) in enumerate(zip(chunks, digests)))


def _checked_key(key: Any) -> Any:
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise KeySourceError(f"key {key!r} is a {type(key).__name__}; keys must be str or int")
    return key


def _not_text(key: str) -> KeySourceError:
    return KeySourceError(f"key {key!r} is not valid Unicode text (a lone surrogate); keys "
                          "must be text JSON can hold")


def _text_keys(value: dict) -> dict[str, Any]:
    """A dict the JSON encoder refused: int keys become their text, anything else is named."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        text = key_text(_checked_key(key))
        if text in out:
            raise KeySourceError(f"key {text!r} appears twice (as str and int)")
        if encode_json(text) is None:
            raise _not_text(text)
        if isinstance(item, float) and not math.isfinite(item):
            word = "NaN" if item != item else "Infinity"
            raise KeySourceError(f"the value for key {text!r} is {word}, which JSON cannot "
                                 "hold and which never equals itself, so the key would rerun "
                                 "on every tick; return a finite number, a version string, or "
                                 "leave the key out until its value is known")
        if encode_json(item) is None:
            raise KeySourceError(f"the value for key {text!r} is not JSON-writable "
                                 f"({type(item).__name__}); return a version string, "
                                 "number, list or dict")
        out[text] = item
    return out
