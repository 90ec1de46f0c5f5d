"""The file system's floor under a first run: creating N per-key artifacts the way barca lays
them out (a directory per key, a temporary file renamed into it), with no orchestration at all.

A batched first run cannot be faster than writing its keys' artifacts, and on a disk where
creating a file or a directory costs hundreds of microseconds that floor, not Python, is most
of the run. Run it on the file system the project lives on:

    .venv/bin/python benchmarks/artifact_floor.py                  # N = 10000, in the temp dir
    .venv/bin/python benchmarks/artifact_floor.py --keys 10000 --dir /path/on/the/project/disk
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from barca.store.artifacts import write_value


def create(root: Path, n: int, threads: int) -> float:
    """Seconds to write n one-line JSON artifacts, each in a directory of its own."""
    def one(i: int) -> None:
        write_value({"retailer": f"r{i:06d}", "rows": 3}, root / f"node_retailer_r{i:06d}" /
                    "0123456789abcdef.json", "json")

    began = time.perf_counter()
    if threads == 1:
        for i in range(n):
            one(i)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(n)))
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", type=int, default=10000)
    parser.add_argument("--dir", default=None, help="where to write (default: the temp dir)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print("| keys | threads | run | seconds | per key |\n|---|---|---|---|---|")
    for threads in (1, 4):
        for run in range(1, args.runs + 1):
            root = Path(tempfile.mkdtemp(prefix="barca-floor-", dir=args.dir))
            try:
                seconds = create(root, args.keys, threads)
            finally:
                shutil.rmtree(root, ignore_errors=True)
            print(f"| {args.keys:,} | {threads} | {run} | {seconds:.2f} s | "
                  f"{seconds / args.keys * 1e6:.0f} µs |")


if __name__ == "__main__":
    main()
