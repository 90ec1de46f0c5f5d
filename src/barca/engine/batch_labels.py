"""The labels of `batches_by(fn)`: the user's function called on each key that runs.

It runs in a separate Python process (the coordinator imports no user code on a tick), once
per batched node per dispatch, on the keys about to run. A function that cannot be found,
that raises on a key, or that gives a label that is not a str or an int is a usage error
naming the node, raised before any of its keys runs.

    python -P -m barca.engine.batch_labels   (a JSON request on stdin, a JSON answer on stdout)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import orjson

from barca.discover.model import Definition
from barca.errors import UsageError
from barca.planner.batching import label_argument
from barca.planner.keys import label_of


def batch_labels(root: Path, d: Definition, dims: Sequence[str],
                 keys: Sequence[str]) -> dict[str, Any]:
    """key -> label for the keys of `d` that run."""
    request = {"root": str(root), "file": d.file, "fn": _function_text(d), "dims": list(dims),
               "keys": list(keys), "node": d.node_id}
    done = subprocess.run([sys.executable, "-P", "-m", "barca.engine.batch_labels"],
                          input=orjson.dumps(request), capture_output=True, cwd=root,
                          check=False)
    try:
        answer = orjson.loads(done.stdout)
    except orjson.JSONDecodeError:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise UsageError(f"{d.node_id}: the batches_by function could not be run: "
                         f"{' '.join(tail) or f'exit status {done.returncode}'}",
                         "Make the function importable from the pipeline file and run "
                         "`barca get` again") from None
    if "error" in answer:
        raise UsageError(answer["error"], answer["fix"])
    return dict(zip(keys, answer["labels"]))


def check_function(root: Path, d: Definition) -> None:
    """The function of `batches_by(fn)` found and callable, in this process (which imports
    the pipeline: a server's load check runs it in a child); a usage error naming the node
    if not."""
    answer = _labels({"root": str(root), "file": d.file, "fn": _function_text(d), "dims": [],
                      "keys": [], "node": d.node_id})
    if "error" in answer:
        raise UsageError(answer["error"], answer["fix"])


def _function_text(d: Definition) -> str:
    """The function argument of `batches_by(fn, ...)` as written."""
    call = ast.parse(d.batch or "", mode="eval").body
    if not isinstance(call, ast.Call) or not call.args:
        raise UsageError(f"{d.node_id}: batches_by needs a function, e.g. batches_by(region_of)",
                         "Pass the function that gives each key its label")
    return ast.unparse(call.args[0])


def _labels(request: dict) -> dict:
    """In the child: import the pipeline, find the function, label every key."""
    from barca.engine.worker.step_runner import import_pipeline

    node, dims = request["node"], request["dims"]
    fix = "Make the batches_by function take a key and return a str or an int label"
    try:
        module = import_pipeline(Path(request["root"]), request["file"])
        fn = eval(request["fn"], vars(module))  # noqa: S307 - the user's own expression
    except Exception as exc:  # noqa: BLE001 - reported to the user with the node
        return {"error": f"{node}: cannot evaluate batches_by({request['fn']}): "
                         f"{type(exc).__name__}: {exc}", "fix": fix}
    if not callable(fn):
        return {"error": f"{node}: batches_by({request['fn']}) is given a "
                         f"{type(fn).__name__}, not a function", "fix": fix}
    labels = []
    for key in request["keys"]:
        try:
            label = fn(label_argument(dims, key))
        except Exception as exc:  # noqa: BLE001
            return {"error": f"{node}: batches_by({request['fn']}) raised on key "
                             f"{label_of(dims, key)}: {type(exc).__name__}: {exc}", "fix": fix}
        if isinstance(label, bool) or not isinstance(label, (str, int)):
            return {"error": f"{node}: batches_by({request['fn']}) gave key "
                             f"{label_of(dims, key)} the label {label!r} "
                             f"({type(label).__name__}); a label must be a str or an int",
                    "fix": fix}
        labels.append(label)
    return {"labels": labels}


def main() -> None:
    request = orjson.loads(sys.stdin.buffer.read())
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # what the pipeline prints must not mix with the answer
    answer = _labels(request)
    if "labels" in answer:  # an int label too big for JSON numbers travels as text
        answer["labels"] = [str(v) if isinstance(v, int) and abs(v) >= 2 ** 63 else v
                            for v in answer["labels"]]
    out.write(orjson.dumps(answer))


if __name__ == "__main__":
    main()
