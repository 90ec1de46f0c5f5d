"""A keyed source's value in the worker: checked, written and packed for the coordinator.

A sensor over 200,000 keys runs on every tick, so each pass over its dict shows in the tick's
time. The common dict (str keys, as a query's rows give) is checked by the JSON encoder while it
writes the file, and sorted once. The file keeps the order the source returned; the digest
recorded for it (SHA-256, cut to barca's 128 bits) is taken over the packed keys and values in
key order, so a query that returns its rows in another order changes nothing downstream.
"""

from __future__ import annotations

import hashlib
import operator
import threading
from pathlib import Path
from typing import Any, Callable

from barca.columns import HASH_WIDTH, pack_chunks
from barca.plan.keys import key_text
from barca.store.artifacts import encode_json, write_bytes, write_value


class KeySourceError(Exception):
    """A partitions_from source returned something that cannot define keys."""


def write_key_source(value: Any, path: Path) -> tuple[int, str, tuple]:
    """Write a key source's value as JSON; returns (size, digest, packed columns), the columns
    being (count, keys chunks, values chunks or None for a list source)."""
    if isinstance(value, (list, tuple)):
        keys = [key_text(_checked_key(item)) for item in value]
        size, digest = write_value(value, path, "json")
        return size, digest, (len(keys), pack_chunks(keys), None)
    if not isinstance(value, dict):
        raise KeySourceError(f"a partitions_from source must return a list or a dict, not "
                             f"{type(value).__name__}")
    data = encode_json(value)  # None unless every key is a str and every value JSON
    if data is None:
        value = _text_keys(value)
        data = encode_json(value)
    written = _in_background(write_bytes, data, path)  # the write lets go of the GIL
    keys = sorted(value)
    keys_chunks = pack_chunks(keys)
    # itemgetter looks every key up in one call (it gives a bare value, not a tuple, for one key)
    values_chunks = pack_chunks(operator.itemgetter(*keys)(value) if len(keys) > 1
                                else [value[k] for k in keys])
    digest = hashlib.sha256()  # twice blake2b's speed here (SHA extensions), on megabytes
    for chunk in (*keys_chunks, *values_chunks):
        digest.update(chunk)
    written()
    return len(data), digest.hexdigest()[:HASH_WIDTH], (len(keys), keys_chunks, values_chunks)


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
