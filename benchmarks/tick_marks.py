"""Where a one-key tick's time goes, function by function, in every process it uses.

Runs one-key ticks of the seed's pipeline (`barca get scored pipeline.py > /dev/null` after one
retailer's orders changed, as benchmarks/user_rows.py's rows 1 and 3 do) with marks
(benchmarks/marks/sitecustomize.py) around the functions named, in turn between the sides, the
order reversed every other round, and prints for each function its median time per tick
(wall, the calling thread's CPU and the pages it mapped afresh) and when it first started,
from the command's spawn. A
side is a number of keys and a source tree; each side has a project of its own (the keyed
example's warehouse and the seed's pipeline, first run untimed), kept under --projects for
the next call when given (a 200,000-key project takes a few minutes to build and run first).
Each side's first tick is not counted: it starts the warm pool the marks' environment needs;
each tick comes TICK_GAP seconds after the one before, as the next poll finds the pool idle.

    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/tick_marks.py --keys 10000,200000
    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/tick_marks.py --keys 200000 \\
        --against /tmp/before/src --rounds 10 --projects /tmp/marks-projects
    ... --add barca.store.metadata:save_states      # one more function to time

The marks cost a few microseconds a call: time functions called a few times a tick, not per key.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import keyed_partitions as kp

TICK_GAP = 1.5  # as benchmarks/user_rows.py: a tick minutes later finds the warm pool idle
MARKS = [
    "barca.engine.driver:run",
    "barca.engine.coordinator:_Run.go",
    "barca.engine.coordinator:_Run._observe_sensors",
    "barca.engine.coordinator:_Run._execute",
    "barca.engine.coordinator:_Run._take_outcome",
    "barca.engine.coordinator:_Run._finish",
    "barca.engine.planning:Planning.plan",
    "barca.engine.planning:Planning.plan_pending",
    "barca.engine.run_recorder:RunRecorder.load_states",
    "barca.engine.run_recorder:RunRecorder.checkpoint",
    "barca.engine.run_recorder:RunRecorder.flush",
    "barca.engine.run_recorder:RunRecorder.finish",
    "barca.engine.key_source_columns:SourceColumns.load",
    "barca.engine.key_source_columns:SourceColumns.save",
    "barca.store.metadata:save_states",
    "barca.engine.worker.step_runner:StepRunner._attempt",
    "barca.engine.worker.key_source:write_key_source",
    "barca.engine.worker.key_source:_sorted_columns",
    "barca.engine.worker.key_source:_packed",
]


class Side:
    def __init__(self, label: str, n: int, src: str, root: Path) -> None:
        self.label, self.n, self.src = label, n, src
        self.project = root / f"{label}-{n}"
        self.walls: list[float] = []
        self.spans: dict[str, list[float]] = defaultdict(list)


def build(side: Side) -> None:
    """The side's project, first run done (untimed), unless kept from an earlier call."""
    if (side.project / ".barca").exists():
        return
    shutil.rmtree(side.project, ignore_errors=True)
    side.project.mkdir(parents=True)
    kp.build_warehouse(side.project, side.n)
    (side.project / "pipeline.py").write_text(kp.SEED_PIPELINE)
    print(f"first run of {side.label} at {side.n:,} keys (untimed) ...", file=sys.stderr)
    tick(side, None, record=False)


def tick(side: Side, marks: str | None, record: bool = True, marks_dir: Path | None = None
         ) -> None:
    env = dict(kp.CHILD_ENV, PYTHONPATH=side.src)
    if marks:
        env.update(PYTHONPATH=f"{HERE / 'marks'}{os.pathsep}{side.src}", BARCA_MARKS=marks,
                   BARCA_MARKS_DIR=str(marks_dir))
    start = time.monotonic()
    done = subprocess.run([*kp.BARCA, "get", "scored", "pipeline.py"], check=False,
                          cwd=side.project, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    end = time.monotonic()
    if done.returncode:
        raise SystemExit(f"{side.label}: barca failed ({done.returncode}):\n"
                         f"{done.stderr.decode()[-2000:]}")
    if record:
        side.walls.append(1000 * (end - start))
        read_marks(side, marks_dir, start)


def read_marks(side: Side, marks_dir: Path, spawned: float) -> None:
    """This tick's marks, summed per function; then the files are removed. A worker may still
    be writing its last mark when the command exits: wait until the files stop growing."""
    sizes: dict[str, int] = {}
    while True:
        now = {p.name: p.stat().st_size for p in marks_dir.iterdir()}
        if now == sizes:
            break
        sizes = now
        time.sleep(0.05)
    took, cpu, faults, first = Counter(), Counter(), Counter(), {}
    for path in marks_dir.iterdir():
        for line in path.read_text().splitlines():
            _, name, start, end, used, pages = line.split()
            took[name] += 1000 * (float(end) - float(start))
            cpu[name] += 1000 * float(used)
            faults[name] += int(pages)
            first[name] = min(first.get(name, 1e9), 1000 * (float(start) - spawned))
        path.unlink()
    for name in took:
        side.spans[name].append(took[name])
        side.spans["cpu " + name].append(cpu[name])
        side.spans["faults " + name].append(faults[name])
        side.spans["at " + name].append(first[name])


def stop_pools(sides: list[Side]) -> None:
    """The warm pools these projects started, by pid (others on the machine are left alone)."""
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"barca.cli.warm_launcher" in argv and any(
                str(s.project).encode() in argv for s in sides):
            try:
                os.kill(int(entry.name), signal.SIGTERM)
            except ProcessLookupError:
                pass


def render(sides: list[Side], names: list[str]) -> str:
    """One line per function: for each side its time per tick (took), the CPU of the thread
    that called it (cpu), when it first started after the command's spawn (at), and the pages
    that thread mapped afresh meanwhile (faults)."""
    width = 32
    lines = [f"{'':36}" + "".join(f"{s.label + ' at ' + format(s.n, ','):>{width}}"
                                   for s in sides),
             f"{'ms, median per tick':36}" + "took     cpu      at  faults".rjust(width) * len(sides),
             f"{'wall, spawn to exit':36}" + "".join(
                 f"{statistics.median(s.walls):{width - 24}.1f}{'':24}" for s in sides)]
    for name in names:
        cells = []
        for side in sides:
            took = side.spans.get(name)
            cells.append("".join(f"{statistics.median(side.spans[k + name]):8.1f}"
                                 for k in ("", "cpu ", "at "))
                         + f"{statistics.median(side.spans['faults ' + name]):8.0f}"
                         if took else "-".rjust(width))
        lines.append(f"{name.split(':')[-1][-36:]:36}" + "".join(c.rjust(width) for c in cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--keys", default="10000,200000", help="key counts, comma-separated")
    parser.add_argument("--against", metavar="SRC", help="another source tree (its src/)")
    parser.add_argument("--rounds", type=int, default=8, help="ticks per side (8)")
    parser.add_argument("--projects", metavar="DIR", help="keep the projects here")
    parser.add_argument("--add", action="append", default=[], metavar="MODULE:NAME",
                        help="one more function to time (repeatable)")
    args = parser.parse_args()
    ours = str(Path(__import__("barca").__file__).resolve().parents[1])
    root = Path(args.projects) if args.projects else Path(tempfile.mkdtemp(prefix="marks-"))
    root.mkdir(parents=True, exist_ok=True)
    sides = [Side(label, int(n), src, root) for n in args.keys.split(",")
             for label, src in [("ours", ours)] + ([("other", args.against)]
                                                    if args.against else [])]
    marks = MARKS + args.add
    marks_dir = Path(tempfile.mkdtemp(prefix="marks-out-"))
    try:
        for side in sides:
            build(side)
            kp.change_one_retailer(side.project, side.n, 0)
            tick(side, ",".join(marks), record=False, marks_dir=marks_dir)
            for path in marks_dir.iterdir():
                path.unlink()
        for r in range(args.rounds):
            for side in sides if r % 2 == 0 else sides[::-1]:
                kp.change_one_retailer(side.project, side.n, r + 1)
                time.sleep(TICK_GAP)  # untimed: the pool quiet, as the next poll finds it
                tick(side, ",".join(marks), marks_dir=marks_dir)
    finally:
        stop_pools(sides)
        shutil.rmtree(marks_dir, ignore_errors=True)
        if not args.projects:
            kp.discard(root)
            kp.remove_discarded()
    print(f"{args.rounds} one-key ticks a side, in turn; {kp.machine()}")
    print(render(sides, marks))


if __name__ == "__main__":
    main()
