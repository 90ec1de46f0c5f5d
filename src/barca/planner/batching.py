"""Which keys of a batched node share a call (`batch=`), decided as a pure function.

A building block: nothing calls it yet. The planner is meant to pass a node's effective batch
setting and its keys that need to run (in declared key order) to `batch_calls`, and render
`describe` in the dry run (views.plan_text says it in words); the engine then runs one step
per call.

Data reaching here:
- `BatchSetting` is the batch= of a node, read from the text discovery keeps
  (`setting_from_text`). `None` means the node declares no batch=: its function takes one key,
  not a list, and no override changes that. `BatchSetting("none")` is the batch form with one
  key per call (`--batch none`): the function still takes a list.
- `batches(<expression>)` and `batches_by(fn)` are evaluated elsewhere (the project must be
  importable). Their results arrive as data: groups through `groups_setting`, labels as a
  key -> label mapping passed to `batch_calls`.

Grouping never changes a hash; it only has to be the same from run to run for the same input.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Sequence

import orjson

from barca.errors import UsageError
from barca.planner.keys import key_text, label_of

Kind = Literal["none", "size", "all", "groups", "labels"]
Calls = tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class BatchSetting:
    """A node's batch= as data. `size` is N for "size" and max_size (or None) for "labels";
    `groups` holds raw keys, None for a `batches(<expression>)` not evaluated yet."""

    kind: Kind
    size: int | None = None
    groups: tuple[tuple[str, ...], ...] | None = None
    strict: bool = False


NONE = BatchSetting("none")
ALL = BatchSetting("all")


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def size_setting(n: int) -> BatchSetting:
    if not _positive_int(n):
        raise UsageError(f"batch size must be a positive integer, not {n!r}",
                         'Write it like batch=20 or batch="all"')
    return BatchSetting("size", size=n)


def group_key(value: Any) -> str:
    """A key as written in batches([...]) to its raw form: a value of one dimension as text,
    a tuple of several dimensions' values (in dimension-name order) as their JSON list."""
    if isinstance(value, (list, tuple)):
        return orjson.dumps([key_text(v) for v in value]).decode()
    return key_text(value)


def groups_setting(node: str, groups: Any, strict: bool = False) -> BatchSetting:
    """batches(...) from its groups (a literal or an evaluated expression): checked here too,
    since an expression's groups were never seen by discovery."""
    fix = 'Write it like batches([["r1", "r2"], ["r3"]])'
    if not isinstance(groups, (list, tuple)):
        raise UsageError(f"{node}: batches() needs a list of groups of keys, not {groups!r}", fix)
    seen: set[str] = set()
    out = []
    for group in groups:
        if not isinstance(group, (list, tuple)) or not group:
            raise UsageError(f"{node}: batches() needs non-empty lists of keys, not {group!r}",
                             fix)
        try:
            keys = tuple(group_key(v) for v in group)
        except TypeError as e:
            raise UsageError(f"{node}: batches() has a key that is not a str or int: {e}",
                             fix) from None
        for key in keys:
            if key in seen:
                raise UsageError(f"{node}: batches() puts key '{key}' in two groups",
                                 "Put each key in one group")
            seen.add(key)
        out.append(keys)
    return BatchSetting("groups", groups=tuple(out), strict=bool(strict))


def labels_setting(max_size: int | None = None) -> BatchSetting:
    if max_size is not None and not _positive_int(max_size):
        raise UsageError(f"batches_by(max_size=) must be a positive integer, not {max_size!r}",
                         "Write it like batches_by(region_of, max_size=20)")
    return BatchSetting("labels", size=max_size)


def setting_from_text(node: str, text: str | None) -> BatchSetting | None:
    """The batch= text kept at discovery (already checked there) as a setting. Literals are
    read; `batches(<expression>)` gives groups=None, to be filled by `groups_setting` once
    evaluated. The helper is known by its name as written (`batches`, `barca.batches_by`):
    an alias (`from barca import batches as grp`) is not recognised here, so discovery should
    keep the canonical name when it is wired in."""
    if text is None:
        return None
    expr = ast.parse(text, mode="eval").body
    if isinstance(expr, ast.Call):
        name = expr.func.attr if isinstance(expr.func, ast.Attribute) else getattr(
            expr.func, "id", None)
        keywords = {k.arg: k.value for k in expr.keywords}
        if name == "batches_by":
            size = keywords.get("max_size")
            return labels_setting(None if size is None else _literal(size))
        if name == "batches":
            strict = _literal(keywords["strict"]) if "strict" in keywords else False
            groups = _literal(expr.args[0]) if expr.args else None
            if groups is _UNREAD:
                return BatchSetting("groups", strict=bool(strict))
            return groups_setting(node, groups, strict)
    value = _literal(expr)
    if value == "all":
        return ALL
    if _positive_int(value):
        return BatchSetting("size", size=value)
    raise UsageError(f"{node}: batch= must be a positive integer, \"all\", batches([...]) or "
                     f"batches_by(fn), not `{text}`", 'Write it like batch=20 or batch="all"')


_UNREAD = object()


def _literal(expr: ast.expr) -> Any:
    try:
        return ast.literal_eval(expr)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _UNREAD


# --- grouping ------------------------------------------------------------------------------

def batch_calls(node: str, setting: BatchSetting | None, keys: Sequence[str],
                labels: Mapping[str, Any] | None = None,
                dims: Sequence[str] = ()) -> Calls | None:
    """The calls of a node for its keys that need to run, given in declared key order.

    None when the node is not batched (its steps stay one per key, the function taking a
    scalar); otherwise a tuple of calls, each a tuple of raw keys in key order, calls ordered
    by their first key. `labels` is key -> label for batches_by (computed by whoever can call
    the user's function); `dims` (sorted dimension names) only names keys in errors.
    """
    if setting is None:
        return None
    keys = tuple(keys)
    if not keys:
        return ()
    kind = setting.kind
    if kind == "none":
        return tuple((k,) for k in keys)
    if kind == "all":
        return (keys,)
    if kind == "size":
        n = setting.size or 1
        return tuple(keys[i:i + n] for i in range(0, len(keys), n))
    if kind == "groups":
        return _by_groups(node, setting, keys, dims)
    if kind == "labels":
        if labels is None:
            raise ValueError(f"{node}: batches_by needs the label of each key")
        return _by_labels(node, setting, keys, labels, dims)
    raise ValueError(f"unknown batch kind {kind!r}")


def _by_groups(node: str, setting: BatchSetting, keys: tuple[str, ...],
               dims: Sequence[str]) -> Calls:
    if setting.groups is None:
        raise ValueError(f"{node}: batches(<expression>) must be evaluated before grouping")
    group_of = {k: i for i, group in enumerate(setting.groups) for k in group}
    calls: dict[Any, list[str]] = {}
    for key in keys:
        i = group_of.get(key)
        if i is None and setting.strict:
            shown = label_of(list(dims), key)
            raise UsageError(
                f"{node}: key {shown} needs to run but is in no group of "
                f"batches(..., strict=True)",
                f"Add '{key}' to a group in batches([...]), or drop strict=True so that a key "
                f"in no group runs alone")
        calls.setdefault(("group", i) if i is not None else ("alone", key), []).append(key)
    return tuple(tuple(c) for c in calls.values())


def _by_labels(node: str, setting: BatchSetting, keys: tuple[str, ...],
               labels: Mapping[str, Any], dims: Sequence[str]) -> Calls:
    by_label: dict[tuple[type, Any], list[str]] = {}
    for key in keys:  # every label is checked before any call is formed
        label = labels[key]
        if isinstance(label, bool) or not isinstance(label, (str, int)):
            raise UsageError(
                f"{node}: batches_by gave key {label_of(list(dims), key)} the label "
                f"{label!r} ({type(label).__name__}); a label must be a str or an int",
                "Return a string or an integer from the batches_by function, e.g. the "
                "key's region")
        by_label.setdefault((type(label), label), []).append(key)
    n = setting.size
    calls: list[tuple[str, ...]] = []
    for group in by_label.values():
        step = n or len(group)
        calls.extend(tuple(group[i:i + step]) for i in range(0, len(group), step))
    position = {k: i for i, k in enumerate(keys)}
    return tuple(sorted(calls, key=lambda c: position[c[0]]))


def label_argument(dims: Sequence[str], key: str) -> Any:
    """What a batches_by function receives for a raw key: the value for one dimension, a dict
    of dimension to value for several (`dims` sorted, as in planner/keys.py)."""
    if len(dims) <= 1:
        return key
    return dict(zip(dims, orjson.loads(key)))


# --- overrides -----------------------------------------------------------------------------

@dataclass(frozen=True)
class BatchOverrides:
    """`--batch` of one run: `every` replaces batch= of every node that declares one; `nodes`
    (name as typed, value) of the nodes named, in the order given. Names are resolved to
    node ids by `node_overrides`."""

    every: BatchSetting | None = None
    nodes: tuple[tuple[str, BatchSetting], ...] = ()


_VALUE_FIX = "Use --batch none, --batch all, --batch N (a positive integer) or --batch NODE=V"


def override_value(text: str) -> BatchSetting:
    """`none`, `all` or a positive integer."""
    word = text.strip()
    if word == "none":
        return NONE
    if word == "all":
        return ALL
    if word.isascii() and word.isdigit() and int(word) >= 1:
        return BatchSetting("size", size=int(word))
    raise UsageError(f"--batch value '{text}' is not none, all or a positive integer",
                     _VALUE_FIX)


def parse_overrides(texts: Sequence[str]) -> BatchOverrides:
    """The run's `--batch` texts (also a server RunRequest.batch); a value for every node at most
    once, each node named at most once."""
    every: BatchSetting | None = None
    nodes: dict[str, BatchSetting] = {}
    for text in texts:
        name, sep, value = str(text).partition("=")
        if not sep:
            if every is not None:
                raise UsageError(f"--batch {text}: a value for every node was already given",
                                 "Give --batch none|all|N once; name nodes with NODE=V")
            every = override_value(text)
            continue
        name = name.strip()
        if not name:
            raise UsageError(f"--batch '{text}' names no node", _VALUE_FIX)
        if name in nodes:
            raise UsageError(f"--batch names node '{name}' twice", "Name each node once")
        nodes[name] = override_value(value)
    return BatchOverrides(every, tuple(nodes.items()))


def node_overrides(overrides: BatchOverrides, resolve: Callable[[str], str],
                   declares_batch: Callable[[str], bool],
                   has_partitions: Callable[[str], bool]) -> dict[str, BatchSetting]:
    """node id -> override for the nodes named. `resolve` turns a name as typed into a node
    id (Graph.resolve_target); naming a node without batch= is a usage error, since its
    function takes one key and cannot be given a list. The fix depends on the node: a
    partitioned one could declare batch=; one without partitions (a sensor, say) has no keys
    to group, and advising batch= on it would send the user to a parse error."""
    out: dict[str, BatchSetting] = {}
    for name, value in overrides.nodes:
        node_id = resolve(name)
        if not declares_batch(node_id):
            if not has_partitions(node_id):
                raise UsageError(
                    f"--batch {name}=...: {node_id} has no partitions, so it has no keys to "
                    "group into calls", f"Drop {name} from --batch: only a partitioned node "
                    "that declares batch= can be named")
            raise UsageError(
                f"--batch {name}=...: {node_id} declares no batch=, so it takes a single key "
                f"and cannot be batched by an override",
                f"Declare batch= on {node_id} (its partition parameter then takes a list of "
                f"keys), or drop {name} from --batch")
        if node_id in out:
            raise UsageError(f"--batch names node {node_id} twice", "Name each node once")
        out[node_id] = value
    return out


def effective_batch(declared: BatchSetting | None, every: BatchSetting | None,
                    for_node: BatchSetting | None) -> BatchSetting | None:
    """The setting a node runs with: a node override, else the run-wide one, else its own.
    A node without batch= stays unbatched whatever the overrides say."""
    if declared is None:
        return None
    return for_node or every or declared


# --- how grouping is shown -----------------------------------------------------------------

LISTED = 20  # a dry run groups batches()/batches_by() only over this many keys


@dataclass(frozen=True)
class BatchPlan:
    """What a dry run says of a batched node: its grouping, the keys that will run and the
    calls they make (None when not grouped: batches/batches_by over more than LISTED keys)."""

    setting: BatchSetting
    keys: int
    calls: int | None

    def as_json(self) -> dict[str, Any]:
        return {"grouping": describe(self.setting), "keys": self.keys, "calls": self.calls}


def batch_plan(node: str, setting: BatchSetting, keys: Sequence[str],
               labels: Mapping[str, Any] | None = None, dims: Sequence[str] = ()) -> BatchPlan:
    """The dry run's count of calls for the keys that will run; `labels` (batches_by) are
    needed only up to LISTED keys."""
    n = len(keys)
    if setting.kind == "none":
        calls: int | None = n
    elif setting.kind == "all":
        calls = 1 if n else 0
    elif setting.kind == "size":
        calls = -(-n // (setting.size or 1))
    elif setting.kind == "labels" and n > LISTED:
        calls = None
    else:  # groups are checked (a strict miss) whatever their number
        calls = len(batch_calls(node, setting, keys, labels, dims) or ())
        calls = calls if n <= LISTED else None
    return BatchPlan(setting, n, calls)


def describe(setting: BatchSetting | None) -> str | None:
    """The grouping as the dry run names it (`batch=all`, `batch=20`, `batches`, ...)."""
    if setting is None:
        return None
    if setting.kind == "size":
        return f"batch={setting.size}"
    if setting.kind in ("none", "all"):
        return f"batch={setting.kind}"
    return "batches" if setting.kind == "groups" else "batches_by"

