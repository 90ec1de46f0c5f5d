"""Stored state as plain data, the form in which store/ hands it to plan/.

One `NodeState` per node, loaded in one read, kept as columns aligned by index rather than an
object per key: with 200,000 keys a tick compares whole columns (`stored == current` runs in
C) and touches single keys only where something changed.

Keys are raw: the key value itself for a one-dimension node (`"r000001"`), the text
`a=1,b=2` for several dimensions, `""` for an unpartitioned node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass(slots=True)
class NodeState:
    """The latest successful result per key, and the keys whose latest attempt failed.

    keys, run_hash, context, signature, fmt, output_hash: one entry per key with a success;
        context holds an index into `contexts`; signature the key's own hash parts (one value
        when the node has one keyed part, else a list)
    contexts: context digests;  parts: context digest -> {part label: digest}
    failed: key -> [run_hash, error message], failures newer than the key's last success
    The planner reads these and never mutates them.
    """

    keys: list[str] = field(default_factory=list)
    run_hash: list[str] = field(default_factory=list)
    context: list[int] = field(default_factory=list)
    signature: list[Any] = field(default_factory=list)
    fmt: list[str] = field(default_factory=list)
    output_hash: list[str | None] = field(default_factory=list)
    contexts: list[str] = field(default_factory=list)
    parts: dict[str, dict[str, str]] = field(default_factory=dict)
    failed: dict[str, list[Any]] = field(default_factory=dict)
    _index: dict[str, int] | None = None
    _lookups: int = 0

    def __len__(self) -> int:
        return len(self.keys)

    def find(self, key: str) -> int | None:
        """Position of a key: a scan in C for the first few lookups, then a dict."""
        if self._index is None:
            self._lookups += 1
            if self._lookups <= 16:
                try:
                    return self.keys.index(key)
                except ValueError:
                    return None
            self._index = dict(zip(self.keys, range(len(self.keys))))
        return self._index.get(key)

    def context_of(self, i: int) -> str:
        return self.contexts[self.context[i]]

    def context_id(self, digest: str) -> int:
        try:
            return self.contexts.index(digest)
        except ValueError:
            self.contexts.append(digest)
            return len(self.contexts) - 1

    def put(self, key: str, run_hash: str, context: str, signature: Any, fmt: str,
            output_hash: str | None) -> None:
        """Record a success for `key` (store/ uses this while loading; the planner never does)."""
        cid = self.context_id(context)
        i = self.find(key)
        if i is None:
            if self._index is not None:
                self._index[key] = len(self.keys)
            self.keys.append(key)
            self.run_hash.append(run_hash)
            self.context.append(cid)
            self.signature.append(signature)
            self.fmt.append(fmt)
            self.output_hash.append(output_hash)
        else:
            self.run_hash[i], self.context[i], self.signature[i] = run_hash, cid, signature
            self.fmt[i], self.output_hash[i] = fmt, output_hash
        self.failed.pop(key, None)

    def with_records(self, records: Iterable[tuple]) -> "NodeState":
        """A copy with extra successes (key, run_hash, context, signature, fmt, output_hash)."""
        copy = NodeState(list(self.keys), list(self.run_hash), list(self.context),
                         list(self.signature), list(self.fmt), list(self.output_hash),
                         list(self.contexts), dict(self.parts), dict(self.failed))
        for record in records:
            copy.put(*record)
        return copy

    def to_json(self) -> dict[str, Any]:
        fmts = set(self.fmt)
        return {"keys": self.keys, "run_hash": self.run_hash, "context": self.context,
                "signature": self.signature,
                "fmt": next(iter(fmts)) if len(fmts) == 1 else self.fmt,
                "output_hash": self.output_hash, "contexts": self.contexts,
                "parts": self.parts, "failed": self.failed}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "NodeState":
        fmt = data["fmt"]
        if isinstance(fmt, str):
            fmt = [fmt] * len(data["keys"])
        return cls(data["keys"], data["run_hash"], data["context"], data["signature"], fmt,
                   data["output_hash"], data["contexts"], data["parts"], data["failed"])


EMPTY_STATE = NodeState()
