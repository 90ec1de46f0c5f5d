"""Stored state as plain data, the form in which store/ hands it to plan/.

One `NodeState` per node, loaded in one read. Its per-key columns stay packed (see
barca.packed_columns): a tick compares whole columns in C and unpacks only where something
changed, so 200,000 unchanged keys cost a few byte comparisons, not 200,000 objects. How a
snapshot is written to the database is store.state_codec's business.

Keys are raw: the key value itself for a one-dimension node (`"r000001"`), the text
`a=1,b=2` for several dimensions, `""` for an unpartitioned node.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from barca.packed_columns import HASH_WIDTH, HashColumn, JsonColumn


@dataclass(frozen=True, slots=True)
class NodeState:
    """The latest successful result per key, and the keys whose latest attempt failed.

    keys, run_hash: one entry per key with a success
    context:   index into `contexts` for every key (an int when all keys share one)
    signature: one column per keyed hash part (a HashColumn of upstream run hashes or a
               JsonColumn of keyed-source values), aligned with keys
    fmt:       artifact format per key (a str when all keys share one)
    output_hash: digest of each key's bytes, kept for sensors and cutoff assets, else None
    parts:     context digest -> {part label: digest}, to explain what changed
    failed:    key -> [run_hash, error message], failures newer than the key's last success
    where:     per key, where its result is in a pack of the node (`<name>.pack@<offset>:<length>`,
               store.packs) or None for a file of its own; None when no key is packed
    Frozen: a change makes a new state (`with_records`, `dataclasses.replace`). The columns
    may build a lookup index on first use (`JsonColumn.indexed`), which changes no value.
    """

    keys: JsonColumn = field(default_factory=JsonColumn)
    run_hash: HashColumn = field(default_factory=HashColumn)
    context: int | list[int] = 0
    contexts: list[str] = field(default_factory=list)
    signature: tuple[Any, ...] = ()
    fmt: str | list[str] = "json"
    output_hash: HashColumn | None = None
    parts: dict[str, dict[str, str]] = field(default_factory=dict)
    failed: dict[str, list[Any]] = field(default_factory=dict)
    where: JsonColumn | None = None

    def __len__(self) -> int:
        return len(self.run_hash)

    def find(self, key: str) -> int | None:
        return self.keys.index(key) if len(self.run_hash) else None

    def context_at(self, i: int) -> str:
        cid = self.context if isinstance(self.context, int) else self.context[i]
        return self.contexts[cid]

    def uniform_context(self) -> str | None:
        if not len(self.run_hash) or not self.contexts:
            return None
        if isinstance(self.context, int):
            return self.contexts[self.context]
        first = self.context[0]
        return self.contexts[first] if self.context.count(first) == len(self.context) else None

    def fmt_at(self, i: int) -> str:
        return self.fmt if isinstance(self.fmt, str) else self.fmt[i]

    def signature_at(self, i: int) -> list[Any]:
        return [column[i] for column in self.signature]

    def output_hash_at(self, i: int) -> str | None:
        return self.output_hash[i] if self.output_hash is not None else None

    def where_at(self, i: int) -> str | None:
        return self.where[i] if self.where is not None else None

    def record(self, i: int) -> tuple:
        """(key, run_hash, context, signature, fmt, output_hash, where) of position i."""
        return (self.keys[i], self.run_hash[i], self.context_at(i), self.signature_at(i),
                self.fmt_at(i), self.output_hash_at(i), self.where_at(i))

    def with_records(self, records: Iterable[tuple]) -> "NodeState":
        """A copy with successes added or replaced; records as `record` returns them."""
        records = list(records)
        if not records:
            return self
        builder = StateBuilder.from_state(self)
        for rec in records:
            builder.put(*rec)
        return builder.build(self.parts, self.failed)


class StateBuilder:
    """Columns as plain lists while a state is assembled key by key (loading, merging)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.index: dict[str, int] = {}
        self.rows: list[list[Any]] = []  # [run_hash, context, signature, fmt, output_hash, where]

    @classmethod
    def from_state(cls, state: NodeState) -> "StateBuilder":
        builder = cls()
        for i in range(len(state)):
            builder.put(*state.record(i))
        return builder

    def put(self, key: str, run_hash: str, context: str, signature: list[Any], fmt: str,
            output_hash: str | None, where: str | None = None) -> None:
        row = [run_hash, context, list(signature or ()), fmt, output_hash, where]
        i = self.index.get(key)
        if i is None:
            self.index[key] = len(self.keys)
            self.keys.append(key)
            self.rows.append(row)
        else:
            self.rows[i] = row

    def build(self, parts: dict, failed: dict) -> NodeState:
        rows = self.rows
        contexts = list(dict.fromkeys(r[1] for r in rows))
        ids = {c: i for i, c in enumerate(contexts)}
        context: int | list[int] = [ids[r[1]] for r in rows]
        if len(contexts) == 1:
            context = 0
        widths = {len(r[2]) for r in rows}
        slots = widths.pop() if len(widths) == 1 else 0
        signature = tuple(_column([r[2][s] for r in rows]) for s in range(slots))
        fmts = [r[3] for r in rows]
        fmt: str | list[str] = fmts[0] if len(set(fmts)) == 1 else fmts
        hashes = [r[4] for r in rows]
        output = HashColumn(hashes) if rows and all(hashes) else None
        where = JsonColumn([r[5] for r in rows]) if any(r[5] for r in rows) else None
        done = set(self.keys)
        return NodeState(JsonColumn(self.keys), HashColumn(r[0] for r in rows), context,
                         contexts, signature, fmt if rows else "json", output,
                         {c: parts[c] for c in contexts if c in parts},
                         {k: v for k, v in failed.items() if k not in done or
                          v[0] != rows[self.index[k]][0]}, where)


def _column(values: list[Any]) -> Any:
    """A HashColumn when every value is a digest (lowercase hex, as barca writes them: packing
    keeps no case), else a JsonColumn."""
    if values and all(isinstance(v, str) and len(v) == HASH_WIDTH for v in values):
        text = "".join(values)
        if text.isalnum() and text == text.lower():
            try:
                return HashColumn(values)
            except ValueError:  # not hex
                pass
    return JsonColumn(values)


EMPTY_STATE = NodeState()


FORMATS = ("json", "parquet", "pickle", "csv", "keyed-json")


def ran_entry(index: int, fmt: str) -> int:
    """A key run in this run: its position in the plan and its format, in one small int."""
    return index * 8 + FORMATS.index(fmt)


def unpack_entry(entry: int) -> tuple[int, str]:
    return entry >> 3, FORMATS[entry & 7]


def state_after_run(plan: Any, old: NodeState, ran: dict[str, int], digests: dict[str, str],
                    failed: dict[str, list], keep_output_hash: bool, whole: bool,
                    packed: dict[str, str] | None = None) -> NodeState:
    """The snapshot after a run: every current key at its current run hash when the run left
    the node complete, else the old snapshot with this run's successes and failures added.

    plan: the node's NodePlan; ran: key -> ran_entry of the keys that succeeded in this run;
    digests: key -> output digest, for nodes whose readers need them; packed: key -> where in
    a pack this run put its result (store.packs), for keys whose result is packed.
    """
    packed = packed or {}
    # a Manual asset's pinned keys keep what their results were computed from, so that the
    # next run still sees them stale
    complete = whole and not failed and not plan.pinned and \
        all(plan.keys[i] in ran for i in plan.run)
    if not complete:
        records = []
        for key, entry in ran.items():
            i, fmt = unpack_entry(entry)
            records.append((key, plan.run_hashes[i], plan.context,
                            [column[i] for column in plan.signatures], fmt, digests.get(key),
                            packed.get(key)))
        new = old.with_records(records)
        parts = dict(new.parts)
        parts.setdefault(plan.context, dict(plan.context_parts))
        return replace(new, parts=parts, failed={**new.failed, **failed})
    fmt, output = _formats_and_digests(plan, old, ran, digests, keep_output_hash)
    return NodeState(plan.keys, plan.run_hashes, 0, [plan.context], plan.signatures, fmt,
                     output, {plan.context: dict(plan.context_parts)}, {},
                     _where(plan, old, ran, packed))


def _where(plan: Any, old: NodeState, ran: dict[str, int], packed: dict[str, str]
           ) -> JsonColumn | None:
    """Where each key's result is packed, from this run or the old snapshot: the old column
    with this run's keys replaced when the keys are those of the old snapshot, in order (a
    tick: a few chunks unpack), else built key by key."""
    if old.where is None and not packed:
        return None
    if old.where is not None and old.keys == plan.keys:
        return old.where.replaced({entry >> 3: packed.get(k) for k, entry in ran.items()})
    if len(old) > 16:
        old.keys.indexed()
    column = []
    for key in plan.keys:
        if key in ran:
            column.append(packed.get(key))
        else:
            j = old.find(key)
            column.append(old.where_at(j) if j is not None else None)
    return JsonColumn(column) if any(column) else None


def _formats_and_digests(plan: Any, old: NodeState, ran: dict[str, int],
                         digests: dict[str, str], keep: bool
                         ) -> tuple[str | list[str], HashColumn | None]:
    """Format (and, when kept, output digest) of every key: from this run or the old snapshot."""
    formats = {FORMATS[entry & 7] for entry in ran.values()}
    cached_fmt = old.fmt if isinstance(old.fmt, str) and len(old) else None
    if not keep and len(formats) <= 1 and (cached_fmt is None or formats <= {cached_fmt}):
        uniform = next(iter(formats)) if formats else cached_fmt
        if uniform is not None and (cached_fmt is not None or len(ran) == len(plan.keys)):
            return uniform, None
    if len(plan.keys) > 16:
        old.keys.indexed()
    fmts, hashes = [], []
    for key in plan.keys:
        if key in ran:
            fmts.append(FORMATS[ran[key] & 7])
            hashes.append(digests.get(key))
        else:
            j = old.find(key)
            fmts.append(old.fmt_at(j))
            hashes.append(old.output_hash_at(j))
    fmt: str | list[str] = fmts[0] if len(set(fmts)) == 1 else fmts
    output = HashColumn(hashes) if keep and all(hashes) else None
    return fmt, output
