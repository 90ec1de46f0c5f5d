"""`barca.get` and `barca.run` for Python callers: the CLI's engine, in process, values loaded.

Errors raise the same classes the CLI maps to exit codes (`UsageError`, `StepFailed`, ...).
"""

from __future__ import annotations

from typing import Any, Sequence


def get(target: str | None = None, files: str | Sequence[str] = (), *,
        refresh: str | Sequence[str] | None = None, refresh_all: bool = False,
        cascade: bool = True, env: str | None = None,
        batch: str | int | dict[str, Any] | None = None) -> Any:
    """Compute `target` (an asset or sensor) and return its value.

    A partitioned target returns {key: value}. Without a target, every asset and sensor is
    brought up to date and the last asset's value is returned. `batch` regroups the stale
    keys of batched nodes for this run: "all", "none", 20, or {"scored": 20}.
    """
    return _call("get", target, files, refresh, refresh_all, cascade, env, batch)


def run(target: str, files: str | Sequence[str] = (), *,
        refresh: str | Sequence[str] | None = None, refresh_all: bool = False,
        cascade: bool = True, env: str | None = None,
        batch: str | int | dict[str, Any] | None = None) -> Any:
    """Run the task `target` (its asset inputs come from cache) and return its value."""
    return _call("run", target, files, refresh, refresh_all, cascade, env, batch)


def _call(command: str, target: str | None, files: str | Sequence[str], refresh: Any,
          refresh_all: bool, cascade: bool, env: str | None, batch: Any) -> Any:
    from barca.engine.driver import run as run_pipeline
    from barca.errors import StepFailed

    paths = [files] if isinstance(files, str) else list(files)
    result = run_pipeline(command, target, paths, refresh=refresh, refresh_all=refresh_all,
                          cascade=cascade, env=env, batch=batch,
                          triggered_by="python")
    if result.failed:
        failure = result.failed[0]
        raise StepFailed(f"step '{failure.step_id}' failed: {failure.error_type}: "
                         f"{failure.error_message}", node=failure.step_id,
                         traceback=failure.traceback)
    node_id = result.final_node()
    return None if node_id is None else result.values(node_id)
