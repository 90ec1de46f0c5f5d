"""A keyed source's value in the worker: checked, written and packed for the coordinator.

A sensor over 200,000 keys runs on every tick, so each pass over its dict shows in the tick's
time. The common dict (str keys, as a query's rows give) is checked by the JSON encoder while it
writes the file, and sorted once. The file keeps the order the source returned; the digest
recorded for it (SHA-256, cut to barca's 128 bits) is taken over the packed keys and values in
key order, so a query that returns its rows in another order changes nothing downstream. Only
the chunks the coordinator does not have already are sent (see barca.store.source_chunks).
"""

from __future__ import annotations

import hashlib
import operator
import threading
from pathlib import Path
from typing import Any, Callable

from barca.columns import HASH_WIDTH, chunk_digest, pack_chunks
from barca.engine.protocol import Known, PackedColumns
from barca.plan.keys import key_text
from barca.store.artifacts import encode_json, write_bytes, write_value


class KeySourceError(Exception):
    """A partitions_from source returned something that cannot define keys."""


def write_key_source(value: Any, path: Path, known: Known) -> tuple[int, str, PackedColumns]:
    """Write a key source's value as JSON; returns (size, digest, its keys and values packed).
    `known` holds the digests of the chunks the coordinator has: those are not sent again."""
    if isinstance(value, (list, tuple)):
        keys = [key_text(_checked_key(item)) for item in value]
        size, digest = write_value(value, path, "json")
        return size, digest, _packed(len(keys), pack_chunks(keys), None, known)[0]
    if not isinstance(value, dict):
        raise KeySourceError(f"a partitions_from source must return a list or a dict, not "
                             f"{type(value).__name__}")
    data = encode_json(value)  # None unless every key is a str and every value JSON
    if data is None:
        value = _text_keys(value)
        data = encode_json(value)
    written = _in_background(write_bytes, data, path)  # the write lets go of the GIL
    keys = sorted(value)
    # itemgetter looks every key up in one call (it gives a bare value, not a tuple, for one key)
    values = operator.itemgetter(*keys)(value) if len(keys) > 1 else [value[k] for k in keys]
    packed, digests = _packed(len(keys), pack_chunks(keys), pack_chunks(values), known)
    written()
    return len(data), hashlib.sha256(digests).hexdigest()[:HASH_WIDTH], packed


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


def _in_background(fn: Callable[..., None], *args: Any) -> Callable[[], None]:
    """Start fn(*args) in a thread; returns a function that waits for it and raises its error."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn(*args)
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()

    def wait() -> None:
        thread.join()
        if errors:
            raise errors[0]
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
