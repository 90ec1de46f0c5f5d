"""Executors: the local pool against Ray on this machine, first runs as whole processes.

Three measurements, each `barca get TARGET pipeline.py --pretty` on a fresh project (its
warehouse built beforehand, untimed), the two executors taken in turn, the order reversed
every other round (local, ray, ray, local, ...), so that a drift of a shared machine's speed
weighs on both alike:

    seed first run     the seed's keyed pipeline (examples/keyed_partitions, as
                       keyed_partitions.py runs it) at --keys (10,000) retailers: a query per
                       key, two assets. Target: Ray's median within 1.5 x the local pool's.
    no-I/O first run   keyed_partitions.py's no-I/O variant (two assets, trivial bodies) at
                       --no-io (20,000) keys per asset: keys per second. Target on Ray: >=
                       5,000 keys/s.
    batch="all"        the seed's pipeline in the batch form, one call per asset, at --batch
                       (200,000) retailers, on Ray only: what one call of 200,000 keys costs
                       when only metadata comes back.

Ray runs on a cluster of this machine started by the script beforehand
(`ray.cluster_utils.Cluster`, one node with every core; the CLI reaches it through
RAY_ADDRESS), as a run finds a cluster that is up; what starting Ray for a run adds (about
5 s) is measured once apart ("ray, started for the run"). Each row gives the median wall
time, min-max and runs, and for Ray the coordinator's own CPU seconds (the CLI process: on
Ray the steps run in the cluster's processes, not its children).

From the no-I/O runs on Ray, less a run of 10 keys (a run's fixed cost: starting, connecting,
planning), it derives, for a projection of 1,000,000 keys on a 32-core cluster: the
coordinator's CPU per key (plans, hands out, records: one process, whatever the cluster's
size) and the workers' CPU per key (wall x cores, less the coordinator's share), plus Ray's
per-task cost measured on the same cluster (leases of no steps).

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/executors.py
    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/executors.py --keys 2000 --no-io 5000 \\
        --batch 20000 --rounds 1
    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/executors.py --write   # + RESULTS.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import keyed_partitions as kp  # noqa: E402 - the fixtures of the keyed benchmark

HERE = Path(__file__).resolve().parent
GET = [*kp.BARCA, "get", "{target}", "pipeline.py", "--pretty"]
TINY = 10  # keys of the no-I/O run whose cost is taken for a run's fixed cost


def project(source: str, warehouse: int = 0) -> Path:
    directory = Path(tempfile.mkdtemp(prefix="barca-executors-"))
    (directory / "pipeline.py").write_text(source)
    if warehouse:
        kp.build_warehouse(directory, warehouse)
    kp.discard(directory)
    return directory


def first_run(source: str, target: str, executor: str, warehouse: int = 0,
              env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """Wall seconds, the CLI process's own CPU seconds, steps executed."""
    directory = project(source, warehouse)
    args = [a.format(target=target) for a in GET] + ["--executor", executor]
    started = time.perf_counter()
    proc = subprocess.Popen(args, cwd=directory, env={**kp.CHILD_ENV, **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n"
                         f"{err.decode()[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, kp.steps_executed(directory)


def in_turn(rounds: int, run: dict) -> dict[str, list[tuple[float, float, int]]]:
    """Each side of `run` (name -> callable) `rounds` times, the order reversed every round."""
    out: dict[str, list] = {name: [] for name in run}
    names = list(run)
    for i in range(rounds):
        for name in names if i % 2 == 0 else reversed(names):
            out[name].append(run[name]())
            print(f"  {name}: {out[name][-1][0]:.1f} s", file=sys.stderr)
    return out


def per_task_seconds(address: str, tasks: int = 400) -> float:
    """Ray's own cost of a lease task that runs no step, in seconds: `tasks` leases of no
    steps, two in flight per CPU, as the executor sends them (measured by this process as a
    driver of the same cluster)."""
    import ray

    from barca.engine.worker.ray_lease import run_lease

    ray.init(address=address, logging_level="ERROR")
    try:
        task = ray.remote(max_retries=0)(run_lease)
        root = tempfile.mkdtemp(prefix="barca-executors-empty-")
        kp.discard(Path(root))
        list(ray.get(list(task.remote(root, "t", ()))))  # the workers start
        cpus = int(ray.cluster_resources().get("CPU", 1))
        started = time.perf_counter()
        pending = []
        for _ in range(tasks):
            pending.append(task.remote(root, "t", ()))
            if len(pending) >= 2 * cpus:
                for ref in pending.pop(0):
                    ray.get(ref)
        for gen in pending:
            for ref in gen:
                ray.get(ref)
        return (time.perf_counter() - started) * cpus / tasks
    finally:
        ray.shutdown()


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}-{max(values):.2f}, " \
           f"{len(values)})"


def render(args: argparse.Namespace, seed: dict, no_io: dict, started: list, batch: tuple,
           tiny: tuple, task_seconds: float, cpus: int, load: tuple[str, str]) -> str:
    lines = [f"Load average before {load[0]}, after {load[1]}. Ray: a cluster of this machine "
             f"({cpus} CPUs), up before the runs.", "",
             "| first run | local pool | ray | ray / local | target |",
             "|---|---|---|---|---|"]
    ratio = statistics.median(r[0] for r in seed["ray"]) / \
        statistics.median(r[0] for r in seed["local"])
    lines.append(f"| seed, {args.keys:,} keys | {cell([r[0] for r in seed['local']])} | "
                 f"{cell([r[0] for r in seed['ray']])} | {ratio:.2f} | <= 1.5: "
                 f"{'met' if ratio <= 1.5 else 'NOT met'} |")
    rates = {side: [r[2] / r[0] for r in runs] for side, runs in no_io.items()}
    ray_rate = statistics.median(rates["ray"])
    lines.append(f"| no-I/O, {args.no_io:,} keys x 2 assets | "
                 f"{cell([r[0] for r in no_io['local']])}, "
                 f"{statistics.median(rates['local']):,.0f} keys/s | "
                 f"{cell([r[0] for r in no_io['ray']])}, {ray_rate:,.0f} keys/s | "
                 f"{statistics.median(rates['local']) / ray_rate:.2f} (time) | ray >= 5,000 "
                 f"keys/s: {'met' if ray_rate >= 5000 else 'NOT met'} |")
    if started:
        lines.append(f"| no-I/O, ray started for the run | | {cell([r[0] for r in started])} "
                     f"| | |")
    if batch:
        wall, cpu, steps = batch
        lines.append(f"| seed batch=\"all\", {args.batch:,} keys | | {wall:.2f} s (1), "
                     f"coordinator CPU {cpu:.1f} s, {steps:,} steps | | |")
    # the projection, from the no-I/O runs on Ray
    runs = no_io["ray"]
    keys = statistics.median(r[2] for r in runs) - tiny[2]
    coordinator = (statistics.median(r[1] for r in runs) - tiny[1]) / keys
    workers = max(0.0, (statistics.median(r[0] for r in runs) - tiny[0]) * cpus / keys
                  - coordinator)
    leases = 1_000_000 / 256
    serial = 1_000_000 * coordinator
    spread = (1_000_000 * workers + leases * task_seconds) / 32
    lines += ["", f"Fixed cost of a run on Ray (no-I/O, {TINY} keys): {tiny[0]:.2f} s, "
              f"coordinator CPU {tiny[1]:.2f} s. Per key on Ray beyond that (no-I/O runs, "
              f"medians): coordinator CPU "
              f"{coordinator * 1e6:.0f} us, workers {workers * 1e6:.0f} us of a core "
              f"(wall x {cpus} CPUs, less the coordinator's); Ray's per-task cost (a lease "
              f"of no steps, two in flight per CPU) {task_seconds * 1e3:.2f} ms of a core.",
              f"Projection, 1,000,000 trivial keys on a 32-core cluster (leases of 256, the "
              f"coordinator on its own core): the coordinator needs about {serial:.0f} s of "
              f"its one core, the workers {spread:.0f} s of 32, so about "
              f"{max(serial, spread):.0f} s, bound by the "
              f"{'coordinator' if serial >= spread else 'workers'}; a key that computes for "
              f"C seconds adds 1,000,000 x C / 32 to the workers' share."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=10_000, help="seed first run's keys")
    parser.add_argument("--no-io", type=int, default=20_000, help="no-I/O variant's keys")
    parser.add_argument("--batch", type=int, default=200_000, help="batch=\"all\" keys; 0 "
                        "to skip")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side")
    parser.add_argument("--write", action="store_true", help="append to benchmarks/RESULTS.md")
    args = parser.parse_args()
    kp.prepare_children()
    from ray.cluster_utils import Cluster

    load_before = open("/proc/loadavg").read().split()[:3]
    cluster = Cluster(initialize_head=True, shutdown_at_exit=False, head_node_args={
        "num_cpus": os.cpu_count(), "include_dashboard": False})
    try:
        ray_env = {"RAY_ADDRESS": cluster.address}
        task_seconds = per_task_seconds(cluster.address)
        seed_source = kp.pipeline_source("seed")
        seed = in_turn(args.rounds, {
            "local": lambda: first_run(seed_source, "scored", "local", args.keys),
            "ray": lambda: first_run(seed_source, "scored", "ray", args.keys, ray_env)})
        no_io_source = kp.NO_IO_PIPELINE.format(n=args.no_io)
        no_io = in_turn(args.rounds, {
            "local": lambda: first_run(no_io_source, "second", "local"),
            "ray": lambda: first_run(no_io_source, "second", "ray", env=ray_env)})
        tiny = first_run(kp.NO_IO_PIPELINE.format(n=TINY), "second", "ray", env=ray_env)
        batch = first_run(kp.pipeline_source("batch-all"), "scored", "ray", args.batch,
                          ray_env) if args.batch else ()
    finally:
        cluster.shutdown()
    started = [first_run(no_io_source, "second", "ray", env={"RAY_ADDRESS": ""})]
    load_after = open("/proc/loadavg").read().split()[:3]
    table = render(args, seed, no_io, started, batch, tiny, task_seconds, os.cpu_count() or 1,
                   (" ".join(load_before), " ".join(load_after)))
    kp.remove_discarded()
    print(table)
    if args.write:
        command = "python benchmarks/executors.py " + " ".join(sys.argv[1:])
        with open(HERE / "RESULTS.md", "a") as fh:
            fh.write(f"\n## Executors: local pool and Ray ({time.strftime('%Y-%m-%d %H:%M')})"
                     f"\n\nMachine: {kp.machine()}. Command: `{command}`.\n\n{table}\n")


if __name__ == "__main__":
    main()
