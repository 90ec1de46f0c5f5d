"""Connecting a run's coordinator to a Ray cluster (engine.ray_executor): at once exit 3 when
nothing answers at its address, the job's runtime environment (the forwarded variables, the
project's files for nodes on other machines), Ray's own chatter kept off barca's stdout."""

from __future__ import annotations

import logging
import signal
import socket
from typing import Any

from barca.errors import InfraError

# the project's files that never go to the cluster: barca's own state, and environments
EXCLUDES = [".barca", ".git", ".venv", "venv", "__pycache__", "node_modules"]


def connect(ray: Any, address: str, env: dict[str, str], working_dir: str | None) -> None:
    """Connect this process to the cluster at `address` ("local": start a Ray of this
    machine), the job carrying `env` and, when given, the project's files (`working_dir`)."""
    _check_reachable(address)
    runtime_env: dict[str, Any] = {"env_vars": env}
    if working_dir is not None:
        runtime_env.update(working_dir=working_dir, excludes=EXCLUDES)
    options: dict[str, Any] = {}
    if address == "local":
        options["include_dashboard"] = False
    # Ray sets its own SIGTERM handler in the driver: the run's handler (cancel) must stay
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=False,
                 logging_level=logging.ERROR, namespace="barca", **options)
    except (ConnectionError, TimeoutError, ValueError) as exc:
        raise InfraError(f"cannot reach the Ray cluster at {address}: {exc}",
                         "start it (`ray start --head`) and set RAY_ADDRESS to its "
                         "address, or unset RAY_ADDRESS to start a Ray of this machine"
                         ) from None
    except Exception as exc:  # noqa: BLE001 - e.g. the working_dir is too large to upload
        raise InfraError(f"Ray could not start the run: {type(exc).__name__}: {exc}",
                         "see Ray's message above; the project's files are sent without "
                         f"{', '.join(EXCLUDES)}") from None
    finally:
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    _cluster_news_to_stderr()


def _check_reachable(address: str) -> None:
    """Exit 3 at once when nothing listens at RAY_ADDRESS: Ray's own connect waits for
    minutes on a cluster that is not there."""
    if address in ("local", "auto"):
        return
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except (OSError, ValueError) as exc:
        raise InfraError(f"cannot reach the Ray cluster at {address}: {exc}",
                         "start it (`ray start --head`) and set RAY_ADDRESS to the "
                         "address it prints, or unset RAY_ADDRESS to start a Ray of this "
                         "machine") from None


def other_machines(ray: Any) -> bool:
    """Whether a node of the cluster is on another machine than this process's own."""
    mine = ray.get_runtime_context().get_node_id()
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    here = {n["NodeManagerAddress"] for n in nodes if n["NodeID"] == mine}
    return any(n["NodeManagerAddress"] not in here for n in nodes)


def _cluster_news_to_stderr() -> None:
    """Ray's driver prints what it hears of the cluster (a node that died, a worker killed by
    the memory monitor) on stdout, which is barca's result (`--json`): send it to stderr with
    barca's progress. This wraps a private function of Ray's (`ray._private.worker`), found by
    name; a Ray without it is left as it is (tests/e2e/test_ray_executor.py reads the JSON)."""
    from ray._private import worker

    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None or getattr(printer, "to_stderr", False):
        return

    def to_stderr(data: dict, ignore_prefix: bool) -> None:
        printer({**data, "is_err": True}, ignore_prefix)

    to_stderr.to_stderr = True  # type: ignore[attr-defined]
    worker.print_to_stdstream = to_stderr
