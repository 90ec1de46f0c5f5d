"""What a server checks when it loads a pipeline, beyond discovery: the decorator expressions
only the pipeline's own module can answer (`partitions(<expr>)`, `batches(<expr>)`, the
function of `batches_by(fn)`), evaluated as a run would evaluate them. A node whose
expression raises is a load error naming the node (seed 002: "under serve, an entry in
/health load_errors"); it and what reads it are left out, and the other nodes are served.
The CLI needs no such pass: a run evaluates the expressions of its cone and stops at exit 2.

The evaluation imports the pipeline's modules, so it runs in a child process: the server
keeps no user code in memory, and a reload (`--watch`) imports the edited files afresh.

    python -P -m barca.engine.load_checks   (a JSON request on stdin, a JSON answer on stdout)
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import orjson

from barca.discover.model import Definition
from barca.errors import UsageError


def expression_errors(root: Path, files: tuple[str, ...], env: str | None,
                      nodes: dict[str, Definition]) -> list[dict]:
    """{node, error, remediation} of each node whose decorator expressions fail."""
    evaluated = sorted(n for n, d in nodes.items() if _evaluated(d))
    if not evaluated:
        return []
    request = {"root": str(root), "files": list(files), "env": env, "nodes": evaluated}
    done = subprocess.run([sys.executable, "-P", "-m", "barca.engine.load_checks"],
                          input=orjson.dumps(request), capture_output=True, cwd=root,
                          check=False)
    try:
        return orjson.loads(done.stdout)
    except orjson.JSONDecodeError:
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [
            f"exit status {done.returncode}"]
        return [{"node": node, "error": f"cannot evaluate the decorator expressions of {node}: "
                 f"{tail[0]}", "remediation": "run `barca status` on the project to see why"}
                for node in evaluated]


def _evaluated(d: Definition) -> bool:
    """Whether the node has an expression that only its module can answer."""
    if any(dim.kind == "expr" for dim in d.dimensions):
        return True
    if not d.batch:
        return False
    call = ast.parse(d.batch, mode="eval").body
    name = getattr(getattr(call, "func", None), "attr", None) or getattr(
        getattr(call, "func", None), "id", None)
    if name == "batches_by":
        return True
    if name != "batches" or not call.args:
        return False
    try:
        ast.literal_eval(call.args[0])
    except ValueError:
        return True
    return False


def _check(request: dict) -> list[dict]:
    """In the child: each node's expressions, evaluated as a run evaluates them."""
    from barca.engine.batch_labels import check_function
    from barca.engine.batch_settings import batch_settings
    from barca.engine.driver import open_pipeline
    from barca.engine.request import evaluate_key_expressions

    root = Path(request["root"])
    pipeline = open_pipeline(request["files"], request["env"], cwd=root)
    graph = pipeline.graph
    errors = []
    for node in request["nodes"]:
        try:
            evaluate_key_expressions(pipeline, frozenset([node]))
            batch_settings(graph, root, frozenset([node]), None)
            if "batches_by" in (graph.nodes[node].batch or ""):
                check_function(root, graph.nodes[node])
        except UsageError as exc:
            errors.append({"node": node, "error": exc.message,
                           "remediation": exc.remediation or ""})
    return errors


def main() -> None:
    request = orjson.loads(sys.stdin.buffer.read())
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # what the pipeline prints must not mix with the answer
    out.write(orjson.dumps(_check(request)))


if __name__ == "__main__":
    main()
