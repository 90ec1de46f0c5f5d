"""A fully cached `barca get`, answered again without discovering, planning or importing the
engine: what a script polling an unchanged pipeline pays is Python's start-up, a few file reads
and one small transaction.

A get whose every step was cached, that ran nothing and said nothing on stderr, keeps what it
prints (the JSON and the human text: `remember`) with everything it was derived from:
- the command as typed (target, files, the directory it ran in) and what a process started now
  inherits (the interpreter, the installed packages, barca's own files, the environment:
  engine.local.environment_identity, and every BARCA_* variable), the number of CPUs;
- the digest of every file discovery read and what each import lookup found (discovery's own
  cache holds them: discover.cache.sources_of), and barca.toml's bytes;
- each node's marks in the metadata database (store.answer_marks: its state rows and newest
  recorded row), read after the run and kept only if they are the ones the run planned from;
- that every node's result file is there, and the bytes of the target's (its value is printed).

Only unpartitioned assets whose cache decision rests on nothing else qualify: no sensor, task,
key, `env=`, Manual or Schedule freshness, nor a cache size limit set by hand (`[cache]
max_size` or BARCA_CACHE_MAX_SIZE, whose trim runs after each run; the default one is not
checked after a get answered here, which writes nothing). `answer` checks all of it again (file contents, not stamps) and, when everything is as it
was, records the run (store.answer_marks.record_again) and returns the same output with
this run's id and times; otherwise None, and the command runs as usual (which keeps a new answer).
"""

from __future__ import annotations

import os
import time

from barca.discover.lookup import file_digest, find_module
from barca.store import answers

TYPE_CHECKING = False  # typing and pathlib are not imported for it
if TYPE_CHECKING:
    from typing import Sequence

    from barca.engine.result import RunResult
    from barca.project import Project

FORMAT = 1
LARGEST_VALUE = 64 * 1024  # a target's result kept in the answer is at most this many bytes


def answer(root: str, cwd: str, target: str | None, paths: Sequence[str], mode: str,
           identity: str) -> str | None:
    """What a `barca get` of `target` in `paths` run in `cwd` prints in `mode` ("json" or
    "pretty"), recorded as a run, when a kept answer still holds; None when it does not
    (nothing is written then). `identity`: engine.local.environment_identity(root), which the
    caller computed (the warm pool is found by it too)."""
    started, began = time.time(), time.perf_counter()
    key = _key(identity, cwd, target, paths)
    kept = answers.load(_answer_file(root, key))
    if kept is None or kept.get("key") != key or mode not in kept.get("text", ()) or \
            not _still_holds(root, kept):
        return None
    from barca.store import answer_marks

    run_id, elapsed = os.urandom(6).hex(), time.perf_counter() - began
    if not answer_marks.record_again(kept["db"], kept["schema"], kept["nodes"], kept["marks"],
                                kept["row"], run_id, started, elapsed):
        return None
    return _fill(kept["text"][mode], run_id, elapsed, time.perf_counter() - began - elapsed)


def _fill(parts: Sequence[str], run_id: str, elapsed: float, metadata: float) -> str:
    """A kept output with this run's values where it has marks (FILLED)."""
    values = {"run_id": f'"{run_id}"', "elapsed_seconds": repr(round(elapsed, 4)),
              "metadata_seconds": repr(round(metadata, 4)), "run": run_id,
              "elapsed": f"{elapsed:.3f}"}
    return "".join(values[part] if i % 2 else part for i, part in enumerate(parts))


# the marks of a kept output: the values of one run, as the JSON writes them (the id is hex)
# and as the human output does (the id, seconds to 3 places)
FILLED = frozenset({"run_id", "elapsed_seconds", "metadata_seconds", "run", "elapsed"})


def _still_holds(root: str, kept: dict) -> bool:
    """Every file discovery read has the same bytes, every import finds the same module,
    barca.toml is the same, every result file is there and the target's has the same
    bytes."""
    try:
        if _read(os.path.join(root, "barca.toml")) != kept["config"]:
            return False
        for file, digest in kept["digests"].items():
            data = _read(os.path.join(root, file))
            if data is None or file_digest(data) != digest:
                return False
        for (folder, name), found in kept["lookups"].items():
            if find_module(root, folder, name) != found:
                return False
        if not all(os.path.isfile(path) for path in kept["artifacts"]):
            return False
        path, data = kept["value"]
        return _read(path) == data
    except (OSError, KeyError, TypeError, ValueError):
        return False


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def _key(identity: str, cwd: str, target: str | None, paths: Sequence[str]) -> tuple:
    return (FORMAT, identity, cwd, "get", target, tuple(paths),
            tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("BARCA_"))),
            os.cpu_count(), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else 0)


def _answer_file(root: str, key: tuple) -> str:
    """One file per command as typed (and environment, BARCA_ENV): a new answer replaces
    the last one instead of piling up beside it when anything else in the key changed."""
    command = key[2:6], os.environ.get("BARCA_ENV")
    return answers.answer_file(os.path.join(root, ".barca"), file_digest(repr(command).encode()))


# -- keeping an answer (after a run, which imported everything already) ----------------------

def _limit_set(project: Project) -> bool:
    """A cache size limit set by hand (barca.toml or BARCA_CACHE_MAX_SIZE), checked after
    every get: such gets run as usual. Under the default limit (a safety net for the disk,
    not a budget) a get answered from a kept answer writes nothing, so its check is skipped."""
    from barca.store.cache_limit import cache_limit

    limit = cache_limit(project)
    return limit.bytes is not None and not limit.default


def remember(project: Project, result: RunResult, target: str | None, paths: Sequence[str],
             outputs: dict[str, tuple[str, str]]) -> None:
    """Keep the answer of a get, if it qualifies (see the module's docstring). `outputs`:
    for each mode, what the run prints in it and the same with each value of FILLED written
    as its name between `\\x00` marks."""
    root = str(project.root)
    parts = {mode: _parts(template, result, text) for mode, (text, template) in outputs.items()}
    if None in parts.values() or not qualifies(result) or _limit_set(project):
        return
    nodes = tuple(result.order)
    artifacts, value = _artifacts(result)
    if value is None:
        return
    from barca.discover.cache import sources_of
    from barca.store import answer_marks

    sources = sources_of(project.root / ".barca" / "discovery.pickle", result.graph.nodes)
    recorded = answer_marks.as_recorded(str(project.db_path), nodes, result.run_id)
    if sources is None or recorded is None or not _as_planned(result, nodes, recorded[1]):
        return
    schema, marks, row = recorded
    from barca.engine.local import environment_identity

    key = _key(environment_identity(root), os.path.realpath(os.getcwd()), target, paths)
    answers.save(_answer_file(root, key), {
        "key": key, "db": str(project.db_path), "schema": schema, "nodes": nodes,
        "marks": answer_marks.marks_digest(marks), "digests": sources[0], "lookups": sources[1],
        "config": _read(os.path.join(root, "barca.toml")), "artifacts": artifacts,
        "value": value, "text": parts, "row": row})


def _parts(template: str, result: RunResult, text: str) -> tuple[str, ...] | None:
    """The template cut at its marks (literal text at even places, names at odd ones); None
    unless filling it with this run's values gives exactly `text`."""
    pieces = template.split("\x00")
    if len(pieces) % 2 == 0 or not set(pieces[1::2]) <= FILLED:
        return None
    same = _fill(pieces, result.run_id, result.elapsed, result.metadata_seconds) == text
    return tuple(pieces) if same else None


def qualifies(result: RunResult) -> bool:
    """Whether a run's answer can be kept, as far as the run itself says (see the module's
    docstring): its caller asks before it renders what `remember` takes."""
    if result.status != "success" or result.executed or result.failed or result.served or \
            result.warnings or result.cache is not None or result.bytes_changed or \
            result.skipped or len(result.targets) > 1:
        return False
    for node_id in result.order:
        d, plan = result.graph.nodes[node_id], result.plans.get(node_id)
        if d.kind != "asset" or d.dimensions or d.env or d.freshness != "always" or \
                plan is None or plan.unknown or plan.partitioned or plan.run:
            return False
    return True


def _artifacts(result: RunResult) -> tuple[tuple[str, ...], tuple[str, bytes] | None]:
    """Every node's result file, and (path, bytes) of the target's: None unless it is JSON
    (the value printed is read from it) of at most LARGEST_VALUE bytes."""
    paths = []
    for node_id in result.order:
        found = result.artifact_of(node_id, "")
        if found is None or "@" in found[0].name:  # a packed result: not a file of its own
            return (), None
        paths.append(str(found[0]))
    final = result.artifact_of(result.final_node(), "")
    if final is None or final[1] != "json":
        return (), None
    data = _read(str(final[0]))
    if data is None or len(data) > LARGEST_VALUE:
        return (), None
    return tuple(paths), (str(final[0]), data)


def _as_planned(result: RunResult, nodes: Sequence[str], marks: tuple) -> bool:
    """The marks read now are those of the states the run planned from: it rewrote none, and
    nothing was recorded for them since they were loaded."""
    for node_id, (head, _, latest) in zip(nodes, marks):
        stored = result.stored.get(node_id)
        if head is None or stored is None or stored.replayed or \
                (head[0], head[1]) != (stored.watermark, stored.generation) or \
                (latest or 0) != head[0]:
            return False
    return True
