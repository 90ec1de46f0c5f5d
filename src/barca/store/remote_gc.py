"""Deleting what no machine can still use from a store several machines share (`barca gc
--remote`), the only way barca ever deletes a remote object.

What is garbage, in the environment's part of the store (`<uri>/<env>/`), is only what no
machine can find, and only once it is older than a grace period (default seven days), so
that nothing another machine's live run may be about to record goes: a run uploads a result
before it indexes it, so until then the object is in no index, and it is young.

- `unreferenced`: a result object (`artifacts/<node>/<leaf>,<sha256>`) that no index entry
  names, in a node directory that has an index: the upload of a run killed before it
  recorded. Node directories with no index at all (sensors' observations, which no other
  machine looks up) are never collected.
- `superseded`: an older object of a leaf that was uploaded again with other bytes, when the
  newest one is older than the grace period too (readers take the newest: any listing made
  within the grace period already sees it).
- `dangling_index`: an index object every entry of which names a result with no object
  left (deleted by hand, or by a lifecycle rule of the bucket).
- `compacted`: an index object a compacted index object covers (store.remote_index), when
  that one is older than the grace period too (and not dangling itself): its entries are in
  the compacted one, which any listing made within the grace period already sees.
- `leftover`: a half-written `.tmp` object of a shared directory's uploads.

Objects barca did not write (no `,<digest>` in the name) are never touched.

Deleting takes two commands: `--dry-run` lists the garbage and keeps that list in the
project's state directory; the next `barca gc --remote` deletes what that list names and is
still garbage now, with the same size and stamp (ETag or mtime) as then: an object a run
uploaded again since is young again, and stays. Nothing is deleted without a list.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from barca.errors import UsageError
from barca.store.packs import file_of
from barca.store.remote_index import is_index_object, parse
from barca.store.remote_results import duration_seconds

DEFAULT_GRACE = 7 * 86400  # seconds an object is kept whatever it is
PLAN_FILE = "gc-remote-plan.json"
_DIGEST = ","  # between a result's leaf and its digest in an object's name (remote_store)


def grace_seconds(text: str) -> int:
    """Seconds from `7d`, `12h`, `30m`, `0` or a number of seconds."""
    seconds = duration_seconds(text)
    if seconds is None:
        raise UsageError(f"--grace {text!r} is not a duration",
                         "give seconds or a number with m, h or d: --grace 7d, 12h, 0")
    return seconds


def survey(store: Any, grace: int, now: float | None = None) -> dict[str, Any]:
    """What the store holds for the environment and what of it is garbage (see the module's
    docstring): one recursive listing and one read of each index object."""
    now = time.time() if now is None else now
    base, index_base = store.base, store.index_base
    top = f"{store.top}/{store.env}/"
    listed = store.retried("list the store", lambda: store.fs.find(
        top, detail=True, withdirs=False))
    objects = {path: info for path, info in listed.items() if info.get("type") != "directory"}
    index_paths = sorted(p for p in objects if p.startswith(index_base + "/")
                         and is_index_object(p.rpartition("/")[2]))
    bodies = store.retried("read the index", lambda: store.fs.cat(index_paths)) \
        if index_paths else {}
    named: dict[str, list[str]] = {}  # index object -> the result files its entries name
    covering: dict[str, list[str]] = {}  # compacted index object -> the objects it covers
    for path in index_paths:
        covers, entries = parse(bodies[path], path.rpartition("/")[2])
        named[path] = [file_of(entry[4]) for entry in entries]
        if covers is not None:
            folder = path.rpartition("/")[0]
            covering[path] = [f"{folder}/{name}" for name in covers]
    referenced = {f for files in named.values() for f in files}
    indexed_dirs = {p[len(index_base) + 1:].rpartition("/")[0] for p in index_paths}

    leaves: dict[str, list[tuple[float, str]]] = {}  # "<node dir>/<leaf>" -> (mtime, path)
    garbage: list[dict[str, Any]] = []
    considered: set[str] = set()
    young = 0

    def consider(path: str, reason: str) -> None:
        nonlocal young
        if path in considered:
            return
        considered.add(path)
        age = now - _mtime(objects[path])
        if age < grace:
            young += 1
            return
        garbage.append({"path": path[len(top):], "bytes": int(objects[path].get("size") or 0),
                        "reason": reason, "age_seconds": round(age),
                        "stamp": _stamp(objects[path])})

    for path, info in objects.items():
        if not path.startswith(base + "/"):
            continue
        leaf, sep, digest = path[len(base) + 1:].rpartition(_DIGEST)
        if not sep or "/" in digest:
            continue  # not an object barca wrote
        if path.endswith(".tmp"):
            consider(path, "leftover")
            continue
        leaves.setdefault(leaf, []).append((_mtime(info), path))
    for leaf, found in leaves.items():
        found.sort()
        newest_when = found[-1][0]
        if leaf not in referenced:
            if leaf.rpartition("/")[0] in indexed_dirs:
                for _, path in found:
                    consider(path, "unreferenced")
            continue
        if now - newest_when >= grace:
            for _, path in found[:-1]:
                consider(path, "superseded")
    present = set(leaves)
    dangling = {path for path, files in named.items()
                if files and not present.intersection(files)}
    for path in sorted(dangling):
        consider(path, "dangling_index")
    for path, covers in covering.items():
        if path not in dangling and now - _mtime(objects[path]) >= grace:
            for covered in covers:
                if covered in objects:
                    consider(covered, "compacted")

    garbage.sort(key=lambda g: g["path"])
    total = sum(int(i.get("size") or 0) for i in objects.values())
    reasons: dict[str, dict[str, int]] = {}
    for item in garbage:
        tally = reasons.setdefault(item["reason"], {"objects": 0, "bytes": 0})
        tally["objects"] += 1
        tally["bytes"] += item["bytes"]
    return {"store": f"{store.remote.uri}/{store.env}", "grace_seconds": grace,
            "objects": len(objects), "bytes": total,
            "garbage": garbage, "garbage_objects": len(garbage),
            "garbage_bytes": sum(g["bytes"] for g in garbage), "by_reason": reasons,
            "young_objects": young}


def save_plan(state_dir: Path, found: dict[str, Any]) -> Path:
    """Keep a dry run's list: what the next `barca gc --remote` may delete."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / PLAN_FILE
    tmp = path.with_name(f".{PLAN_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"store": found["store"], "grace_seconds": found["grace_seconds"],
                               "listed_at": time.time(),
                               "objects": {g["path"]: [g["bytes"], g["stamp"]]
                                           for g in found["garbage"]}}))
    os.replace(tmp, path)
    return path


def load_plan(state_dir: Path, store: str) -> dict[str, Any]:
    """The list the last dry run kept for `store` (exit 2 naming the dry run when none)."""
    path = state_dir / PLAN_FILE
    try:
        plan = json.loads(path.read_text())
    except (OSError, ValueError):
        plan = None
    if not isinstance(plan, dict) or plan.get("store") != store:
        raise UsageError(f"barca gc --remote deletes only what a dry run listed, and there is "
                         f"no list for {store}",
                         "run `barca gc --remote --dry-run` first, check what it lists, then "
                         "`barca gc --remote`")
    return plan


def delete(store: Any, state_dir: Path, plan: dict[str, Any], found: dict[str, Any]
           ) -> dict[str, Any]:
    """Delete what the plan lists that `found` (a survey made just now) still calls garbage
    with the same size and stamp; the plan is used up either way."""
    listed = plan["objects"]
    now = {g["path"]: g for g in found["garbage"]}
    chosen = [now[p] for p in sorted(listed) if p in now
              and [now[p]["bytes"], now[p]["stamp"]] == listed[p]]
    failed: list[dict[str, str]] = []
    if chosen:
        try:
            top = f"{store.top}/{store.env}/"
            store.retried("delete garbage",
                          lambda: store.fs.rm([top + g["path"] for g in chosen]))
        except Exception as exc:  # noqa: BLE001 (the store's own error, reported per object)
            failed = [{"path": g["path"], "error": str(exc)} for g in chosen]
    (state_dir / PLAN_FILE).unlink(missing_ok=True)
    gone = [g for g in chosen if not failed]
    return {"deleted": gone, "deleted_objects": len(gone),
            "deleted_bytes": sum(g["bytes"] for g in gone),
            "skipped_objects": len(listed) - len(chosen), "failed": failed}


def _mtime(info: dict[str, Any]) -> float:
    when = info.get("LastModified") or info.get("mtime") or info.get("last_modified") or 0
    return when.timestamp() if hasattr(when, "timestamp") else float(when)


def _stamp(info: dict[str, Any]) -> str:
    """What tells an object from another written at the same name later (the same bytes
    have the same ETag: the time tells them apart)."""
    return f"{info.get('ETag') or info.get('etag') or ''}@{_mtime(info)}"
