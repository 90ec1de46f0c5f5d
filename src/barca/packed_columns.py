"""Per-key columns that can stay packed: compared whole in C, unpacked only where they differ.

A tick over 200,000 keys where nothing changed must not build 200,000 Python objects per
column. Two packed forms cover every column barca keeps per key:

    JsonColumn   a list of JSON values (keys, keyed-source values), packed as the orjson bytes
                 of each run of CHUNK items, object keys sorted. Equal lists pack to equal
                 bytes, so two packed columns are equal exactly when their chunks are.
    HashColumn   fixed-width hex digests (run hashes, output hashes), packed as raw bytes in
                 chunks of CHUNK digests; item i is a slice, so reading one unpacks nothing.

Both also accept a plain list and pack it on demand. Columns are values: `replaced` returns a
new column and never changes the old one.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import operator
from typing import Any, Iterable, Iterator, Sequence

import orjson

HASH_WIDTH = 32
# sets of item types within which Python's `==` agrees with JSON equality
_EXACT_WITH_STR = frozenset({str, int, type(None)})
_EXACT_WITH_FLOAT = frozenset({str, float, type(None)})
CHUNK = 4096  # items per packed chunk of a column
_DIGEST_BYTES = HASH_WIDTH // 2


def same_value(a: Any, b: Any) -> bool:
    """Equal as JSON: Python's `1 == 1.0 == True` is not enough, the written form must match."""
    if a.__class__ is not b.__class__ or a != b:
        return False
    if a.__class__ in (dict, list):
        return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == \
            orjson.dumps(b, option=orjson.OPT_SORT_KEYS)
    return True


class JsonColumn:
    """A list of JSON values, packed as chunks: the orjson bytes of each run of CHUNK items.

    Chunk boundaries depend only on positions, so two columns of equal length are compared
    chunk by chunk, and a change at one key unpacks (and rewrites, see barca.state) one chunk.
    """

    __slots__ = ("_chunks", "_items", "_decoded", "_index", "_n", "ascending")

    def __init__(self, items: Sequence[Any] | None = None,
                 chunks: Sequence[bytes] | None = None, n: int | None = None,
                 ascending: bool = False) -> None:
        # known to be in ascending order (a dict source's keys, see planner.keys.sorted_keys):
        # its smallest items are its first ones, read without unpacking the rest
        self.ascending = ascending
        if items is None and chunks is None:
            items = []
        self._items = list(items) if items is not None and not isinstance(items, list) else items
        self._chunks = tuple(chunks) if chunks is not None else None
        self._n = len(self._items) if self._items is not None else n
        self._decoded: dict[int, list[Any]] | None = None  # chunk number -> its items
        self._index: dict[Any, int] | None = None

    @property
    def chunks(self) -> tuple[bytes, ...]:
        if self._chunks is None:
            self._chunks = pack_chunks(self._items)  # type: ignore[arg-type]
        return self._chunks

    @property
    def items(self) -> list[Any]:
        if self._items is None:
            self._items = unpack_chunks(self._chunks)  # type: ignore[arg-type]
        return self._items

    def json_parts(self) -> Iterator[bytes]:
        """The bytes of the whole list as one JSON array, in pieces (for hashing)."""
        return _array_parts(self.chunks)

    def __len__(self) -> int:
        if self._n is None:
            self._n = len(self.items)
        return self._n

    def __getitem__(self, i: int) -> Any:
        """One item; a packed column unpacks only that item's chunk (the few keys a tick
        changed must not unpack 200,000)."""
        if self._items is not None:
            return self._items[i]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        if self._decoded is None:
            self._decoded = {}
        chunk = self._decoded.get(i // CHUNK)
        if chunk is None:
            chunk = self._decoded[i // CHUNK] = orjson.loads(self.chunks[i // CHUNK])
        return chunk[i % CHUNK]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HashColumn):
            return len(self) == len(other) and self.items == list(other)
        if not isinstance(other, JsonColumn):
            return NotImplemented
        if self is other:
            return True
        # bytes: 1, 1.0 and true stay different
        return len(self) == len(other) and self.chunks == other.chunks

    __hash__ = None  # type: ignore[assignment]

    def index(self, value: Any) -> int | None:
        """Position of a value: in an ascending column still packed, a bisection that
        unpacks a few chunks; otherwise a scan in C for a few lookups, a dict after that."""
        if self._index is None and self.ascending and self._items is None:
            try:
                i = bisect.bisect_left(self, value)
            except TypeError:  # a value that does not compare with the keys: not one of them
                return None
            return i if i < len(self) and self[i] == value else None
        if self._index is None:
            try:
                return self.items.index(value)
            except ValueError:
                return None
        return self._index.get(value)

    def indexed(self) -> "JsonColumn":
        """Build the lookup dict once, for many `index` calls."""
        if self._index is None:
            self._index = dict(zip(self.items, range(len(self.items))))
        return self

    def replaced(self, changes: dict[int, Any]) -> "JsonColumn":
        """A new column with items at these positions replaced; only their chunks unpack."""
        if not changes:
            return self
        if self._items is not None:
            items = list(self._items)
            for i, value in changes.items():
                items[i] = value
            return JsonColumn(items)
        chunks = list(self.chunks)
        edited: dict[int, list[Any]] = {}
        for i, value in changes.items():
            c, j = divmod(i, CHUNK)
            if c not in edited:
                edited[c] = orjson.loads(chunks[c])
            edited[c][j] = value
        for c, items in edited.items():
            chunks[c] = orjson.dumps(items, option=orjson.OPT_SORT_KEYS)
        return JsonColumn(chunks=chunks, n=len(self))

    def differing(self, other: "JsonColumn | HashColumn") -> list[int]:
        """Positions where two columns of equal length differ; only differing chunks unpack."""
        if self == other:
            return []
        if isinstance(other, HashColumn):
            return _differing_items(self.items, list(other), 0)
        out: list[int] = []
        for c, (mine, theirs) in enumerate(zip(self.chunks, other.chunks)):
            if mine != theirs:
                out.extend(_differing_items(orjson.loads(mine), orjson.loads(theirs), c * CHUNK))
        return out


def chunk_digest(chunk: bytes) -> bytes:
    """128 bits of SHA-256 (hardware-accelerated on most CPUs, twice blake2b's speed here)."""
    return hashlib.sha256(chunk).digest()[:_DIGEST_BYTES]


def pack_chunks(items: Sequence[Any]) -> tuple[bytes, ...]:
    """Object keys sorted at every level, so equal values pack to equal bytes."""
    return tuple(orjson.dumps(items[start:start + CHUNK], option=orjson.OPT_SORT_KEYS)
                 for start in range(0, len(items), CHUNK))


def unpack_chunks(chunks: Sequence[bytes]) -> list[Any]:
    if len(chunks) == 1:
        return orjson.loads(chunks[0])
    return orjson.loads(b"".join(_array_parts(chunks)))


def _array_parts(chunks: Sequence[bytes]) -> Iterator[bytes]:
    """Chunks (each a JSON array) as the pieces of the one array they make together."""
    yield b"["
    for i, chunk in enumerate(chunks):
        if i:
            yield b","
        yield chunk[1:-1]
    yield b"]"


def _differing_items(mine: list[Any], theirs: list[Any], offset: int) -> list[int]:
    kinds = set(map(type, mine)) | set(map(type, theirs))
    if kinds <= _EXACT_WITH_STR or kinds <= _EXACT_WITH_FLOAT:
        # `==` is exact here (no 1 == 1.0 == True, no containers): compare in C
        return list(itertools.compress(range(offset, offset + len(mine)),
                                       map(operator.ne, mine, theirs)))
    return [offset + i for i, (a, b) in enumerate(zip(mine, theirs)) if not same_value(a, b)]


class HashColumn:
    """Fixed-width hex digests, packed as their raw bytes in chunks of CHUNK digests.

    Item i is read from its chunk alone; `replaced` copies only the chunks it changes, so the
    new column shares every other chunk (and compares equal to it by identity) with the old."""

    __slots__ = ("_chunks", "_n")

    def __init__(self, items: Iterable[str] | None = None,
                 chunks: Sequence[bytes] | None = None) -> None:
        if chunks is None:
            hexes = items if isinstance(items, list) else list(items or ())
            chunks = [bytes.fromhex("".join(hexes[start:start + CHUNK]))
                      for start in range(0, len(hexes), CHUNK)]
        self._chunks = tuple(chunks)
        self._n = sum(map(len, self._chunks)) // _DIGEST_BYTES

    @property
    def chunks(self) -> tuple[bytes, ...]:
        return self._chunks

    def hex_parts(self) -> Iterator[bytes]:
        """The digests as one run of hex text, in pieces (for hashing)."""
        return (chunk.hex().encode() for chunk in self._chunks)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> str:
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(i)
        c, j = divmod(i, CHUNK)
        return self._chunks[c][j * _DIGEST_BYTES:(j + 1) * _DIGEST_BYTES].hex()

    def __iter__(self) -> Iterator[str]:
        for chunk in self._chunks:
            text = chunk.hex()
            yield from (text[s:s + HASH_WIDTH] for s in range(0, len(text), HASH_WIDTH))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JsonColumn):
            return other == self
        if not isinstance(other, HashColumn):
            return NotImplemented
        return self._chunks == other._chunks

    __hash__ = None  # type: ignore[assignment]

    def differing(self, other: "HashColumn | JsonColumn") -> list[int]:
        """Positions that differ, found chunk by chunk so equal stretches cost one compare."""
        if isinstance(other, JsonColumn):
            return other.differing(self)
        out: list[int] = []
        width, block = _DIGEST_BYTES, _DIGEST_BYTES * 64  # blocks first: a chunk holds 4,096
        for c, (a, b) in enumerate(zip(self._chunks, other._chunks)):
            if a == b:
                continue
            end = min(len(a), len(b)) // width * width
            for start in range(0, end, block):
                if a[start:start + block] != b[start:start + block]:
                    out.extend(c * CHUNK + j // width
                               for j in range(start, min(start + block, end), width)
                               if a[j:j + width] != b[j:j + width])
        return out

    def replaced(self, changes: dict[int, str]) -> "HashColumn":
        chunks = list(self._chunks)
        edited: dict[int, bytearray] = {}
        for i, digest in changes.items():
            c, j = divmod(i, CHUNK)
            if c not in edited:
                edited[c] = bytearray(chunks[c])
            edited[c][j * _DIGEST_BYTES:(j + 1) * _DIGEST_BYTES] = bytes.fromhex(digest)
        for c, data in edited.items():
            chunks[c] = bytes(data)
        return HashColumn(chunks=chunks)
