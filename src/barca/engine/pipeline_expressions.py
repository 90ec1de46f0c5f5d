"""Expressions a decorator names but discovery cannot read (`partitions(REGIONS)`,
`batches(GROUPS)`): evaluated in the pipeline's module, imported with the project on the path,
so they see what the function would. Any failure is a usage error naming the node and the fix.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from barca.errors import UsageError


def evaluate(root: Path, file: str, expr: str, what: str, fix: str,
             convert: Callable[[Any], Any] = lambda value: value) -> Any:
    """`convert(eval(expr))` in `file`'s module; `what` says what was evaluated, in the error
    ("the keys of pipeline.py:sales (partitions(REGIONS))")."""
    from barca.engine.worker.step_runner import import_pipeline

    try:
        module = import_pipeline(root, file)
        return convert(eval(expr, vars(module)))  # noqa: S307 - the user's own expression
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - sys.exit() in the file is a cause too
        raise UsageError(f"cannot evaluate {what}: {type(exc).__name__}: {exc}", fix) from exc
