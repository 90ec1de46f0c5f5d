"""A keyed source's value in the worker: checked, written and packed for the coordinator.

A sensor over 200,000 keys runs on every tick, so each pass over its dict shows in the tick's
time. A dict is sorted by key once and its keys and values packed in chunks; the packing checks
that they are JSON. The file (keyed-json) is written from those chunks in a thread, which lets
go of the GIL while it writes. The digest recorded for it (SHA-256, cut to barca's 128 bits) is
taken over the chunks' digests, so a query that returns its rows in another order changes
nothing downstream. Only the chunks the coordinator does not have already are sent (see
barca.store.source_chunks).
"""

from __future__ import annotations

import hashlib
import operator
import threading
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import orjson

from barca.columns import CHUNK, HASH_WIDTH, chunk_digest, pack_chunks
from barca.engine.protocol import Known, PackedColumns
from barca.plan.keys import key_text
from barca.store.artifacts import JSON_OPTS, encode_json, has_non_finite, write_keyed_json, \
    write_value

_STRICT = JSON_OPTS | orjson.OPT_SORT_KEYS
T = TypeVar("T")


class KeySourceError(Exception):
    """A partitions_from source returned something that cannot define keys."""


def write_key_source(value: Any, path: Path, known: Known) -> tuple[str, int, str, PackedColumns]:
    """Write a key source's value; returns (format, size, digest, its keys and values packed).
    `known` holds the digests of the chunks the coordinator has: those are not sent again."""
    if isinstance(value, (list, tuple)):
        keys = [key_text(_checked_key(item)) for item in value]
        size, digest = write_value(value, path, "json")
        return "json", size, digest, _packed(len(keys), pack_chunks(keys), None, known)[0]
    if not isinstance(value, dict):
        raise KeySourceError(f"a partitions_from source must return a list or a dict, not "
                             f"{type(value).__name__}")
    columns = _sorted_columns(value)  # None unless every key is a str and every value JSON
    if columns is None:
        columns = _sorted_columns(_text_keys(value))
        assert columns is not None, "_text_keys names what JSON cannot hold"
    key_chunks, value_chunks = columns
    written = _in_background(write_keyed_json, key_chunks, value_chunks, path)
    packed, digests = _packed(len(value), key_chunks, value_chunks, known)
    return "keyed-json", written(), hashlib.sha256(digests).hexdigest()[:HASH_WIDTH], packed


def _sorted_columns(value: dict) -> tuple[tuple[bytes, ...], tuple[bytes, ...]] | None:
    """The keys in order and their values, packed; None when a key is not a str or a value is
    not JSON that reads back as it is (then `_text_keys` converts or names it)."""
    try:
        keys = sorted(value)  # mixed key types do not sort
    except TypeError:
        return None
    if keys and keys[0].__class__ is not str:  # sorted with a str, so every key is one
        return None
    # itemgetter looks every key up in one call (it gives a bare value, not a tuple, for one key)
    values = operator.itemgetter(*keys)(value) if len(keys) > 1 else [value[k] for k in keys]
    try:
        key_chunks, value_chunks = _strict_chunks(keys), _strict_chunks(values)
    except (TypeError, orjson.JSONEncodeError):
        return None
    for i, chunk in enumerate(value_chunks):  # orjson writes NaN and inf as null
        if b"null" in chunk and has_non_finite(values[i * CHUNK:(i + 1) * CHUNK]):
            return None
    return key_chunks, value_chunks


def _strict_chunks(items: Sequence[Any]) -> tuple[bytes, ...]:
    """pack_chunks, refusing what JSON would not give back as it is (datetimes, dataclasses,
    subclasses of str and int); the bytes are pack_chunks' for everything else."""
    return tuple(orjson.dumps(items[start:start + CHUNK], option=_STRICT)
                 for start in range(0, len(items), CHUNK))


def _packed(count: int, keys: tuple[bytes, ...], values: tuple[bytes, ...] | None,
            known: Known) -> tuple[PackedColumns, bytes]:
    """The columns with each chunk the coordinator already has left out (None), and all the
    chunks' digests joined (what the whole value's digest is taken over)."""
    key_digests = tuple(map(chunk_digest, keys))
    value_digests = tuple(map(chunk_digest, values)) if values is not None else ()
    packed = PackedColumns(count, _unknown(keys, key_digests, known[0]),
                           None if values is None else _unknown(values, value_digests, known[1]),
                           key_digests, value_digests)
    return packed, b"".join(key_digests + value_digests)


def _unknown(chunks: tuple[bytes, ...], digests: tuple[bytes, ...],
             told: tuple[bytes, ...]) -> tuple[bytes | None, ...]:
    return tuple(None if i < len(told) and digest == told[i] else chunk
                 for i, (chunk, digest) in enumerate(zip(chunks, digests)))


def _in_background(fn: Callable[..., T], *args: Any) -> Callable[[], T]:
    """Start fn(*args) in a thread; returns a function that waits for it and gives its result
    or raises its error."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def wait() -> T:
        thread.join()
        if isinstance(outcome[0], BaseException):
            raise outcome[0]
        return outcome[0]
    return wait


def _checked_key(key: Any) -> Any:
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise KeySourceError(f"key {key!r} is a {type(key).__name__}; keys must be str or int")
    return key


def _text_keys(value: dict) -> dict[str, Any]:
    """A dict the JSON encoder refused: int keys become their text, anything else is named."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        text = key_text(_checked_key(key))
        if text in out:
            raise KeySourceError(f"key {text!r} appears twice (as str and int)")
        if encode_json(item) is None:
            raise KeySourceError(f"the value for key {text!r} is not JSON-writable "
                                 f"({type(item).__name__}); return a version string, "
                                 "number, list or dict")
        out[text] = item
    return out
