"""Frozen data that discovery hands to the graph layer: one `Definition` per decorated function.

Nothing here imports user code; every field is read from source text with `ast`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class InputSpec:
    """One parameter fed by an upstream node.

    mode: "value"   the upstream's value (for a partitions_from source: that key's value)
          "collect" every key of a partitioned upstream, as a list sorted by key label
          "order"   an underscore parameter not wrapped in collect(): ordering only, the
                    function receives None
    """

    param: str
    source: str  # upstream node id, e.g. "pipeline.py:cleaned"
    mode: str = "value"


@dataclass(frozen=True, slots=True)
class DimensionSpec:
    """One partition dimension of a node.

    kind: "static" keys written as a literal list (ints already turned into str)
          "expr"   any other expression, evaluated later with the project importable
          "from"   partitions_from(source): keys come from another node
    """

    name: str
    kind: str
    keys: tuple[str, ...] | None = None
    expr: str | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """One `@sink(path, serializer=...)` stacked on an asset: an extra copy of its result.

    path: as written; a local path (relative to the project root), `file://...`, or an
          fsspec URL (`s3://...`); ending in `/` it is a dataset sink: a directory, with one
          directory per key of a partitioned asset
    """

    path: str
    serializer: str | None = None


@dataclass(frozen=True, slots=True)
class Definition:
    node_id: str  # "<root-relative file>:<name>"
    name: str  # name= or the function name
    function: str  # the Python function name in its module
    file: str  # root-relative posix path of the file
    line: int  # line of the `def`
    kind: str  # "asset" | "sensor" | "task"
    params: tuple[str, ...]  # the function's parameter names, in order
    annotations: tuple[tuple[str, str], ...]  # (param, annotation source); "return" for the result
    inputs: tuple[InputSpec, ...]
    dimensions: tuple[DimensionSpec, ...]
    freshness: str  # "always" | "manual" | "schedule"
    schedule: str | None  # the cron text of Schedule(...)
    serializer: str | None
    retries: int
    retry_backoff: float
    timeout_seconds: float
    env: tuple[str, ...]
    cutoff: bool
    weight: int
    batch: str | None  # source text of batch=, None when absent
    description: str | None
    tags: tuple[tuple[str, str], ...]
    definition_hash: str  # hex digest over code + counted decorator parts + helper cone
    hash_parts: tuple[tuple[str, str], ...]  # (part label, digest), see discover.hashing
    schedule_batch: tuple[str, ...] = ()  # Schedule(cron, batch=...) as --batch texts (serve)
    schedule_max_failures: int = 5  # Schedule(max_failures=): failed ticks in a row that pause it
    schedule_timeout: float | None = None  # Schedule(timeout_seconds=); None: the server's limit
    sinks: tuple[SinkSpec, ...] = ()  # @sink decorators, top to bottom
    unused: tuple[str, ...] = ()  # input parameters the body never mentions (discover.unused)
    # environment variables the code reads but env= does not declare (discover.env_reads):
    # reported, never hashed
    undeclared_env: tuple[str, ...] = ()
    deterministic: bool = True  # False: new bytes for the same run hash are expected
    # digest of the file's bytes discovery read: a worker checks it imports the same file
    # (engine.source_check)
    source_digest: str = ""
    # the definition hash under scheme 1 (code as text), and scheme 1's digests of the parts
    # scheme 2 hashes differently: results recorded before an upgrade are recognised with
    # them (planner.upgrade), and a stale reason names only the parts that really changed
    legacy_hash: str = ""
    legacy_parts: tuple[tuple[str, str], ...] = ()

    @property
    def pinned(self) -> bool:
        """A `freshness=Manual` asset: computed once, then kept until `--refresh` names it."""
        return self.kind == "asset" and self.freshness == "manual"

    @property
    def bytes_read(self) -> bool:
        """Readers hash this asset's output bytes, not its run hash: `cutoff=True`, or a
        Manual asset (a pinned result is not what its current run hash describes)."""
        return self.cutoff or self.pinned

    def annotation(self, param: str) -> str | None:
        for name, text in self.annotations:
            if name == param:
                return text
        return None
