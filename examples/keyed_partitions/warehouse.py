"""The warehouse the keyed example reads: an `orders` table in warehouse.duckdb, N retailers.

    python warehouse.py build 10000        # 3 orders per retailer, r000000 .. r009999
    python warehouse.py touch r000010      # that retailer's orders change (one hour later)

then, next to pipeline.py (the user's example, unchanged):

    barca get scored pipeline.py           # first run: every retailer
    python warehouse.py touch r000010
    barca get scored pipeline.py --dry-run # names r000010 and why
    barca get scored pipeline.py           # 3 steps: the sensor and that retailer twice

benchmarks/keyed_partitions.py builds its warehouses with these functions.
"""

from __future__ import annotations

import sys
from pathlib import Path

ORDERS_PER_RETAILER = 3


def retailer(i: int) -> str:
    return f"r{i:06d}"


def build(directory: Path, n: int) -> None:
    """A fresh orders table, sorted by retailer, with timestamps spread over ten hours."""
    import duckdb

    con = duckdb.connect(str(directory / "warehouse.duckdb"))
    try:
        con.execute(
            "create or replace table orders as "
            "select 'r' || lpad((i // ?)::varchar, 6, '0') as retailer, i as amount, "
            "timestamp '2026-10-22 09:00:00' + to_minutes((i % 600)::bigint) as updated_at "
            "from range(?) t(i) order by retailer",
            [ORDERS_PER_RETAILER, n * ORDERS_PER_RETAILER])
    finally:
        con.close()


def touch(directory: Path, name: str) -> None:
    """Move one retailer's orders an hour later: its max(updated_at), its version, changes."""
    import duckdb

    con = duckdb.connect(str(directory / "warehouse.duckdb"))
    try:
        con.execute("update orders set updated_at = updated_at + interval 1 hour "
                    "where retailer = ?", [name])
    finally:
        con.close()


def main(argv: list[str]) -> int:
    here = Path.cwd()
    if len(argv) == 2 and argv[0] == "build" and argv[1].isdigit():
        build(here, int(argv[1]))
        print(f"warehouse.duckdb: {argv[1]} retailers, {ORDERS_PER_RETAILER} orders each")
        return 0
    if len(argv) == 2 and argv[0] == "touch":
        touch(here, argv[1])
        print(f"warehouse.duckdb: {argv[1]}'s orders moved one hour later")
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
