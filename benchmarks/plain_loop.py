"""The plain loop: the seed's per-key work with no orchestration, the yardstick of a first run.

One Python process, one read-only DuckDB connection to the keyed example's warehouse
(examples/keyed_partitions/warehouse.py builds it): the sensor's query for the retailers and
their versions, then for each retailer the seed's `cleaned` query (`.df()`, as the seed does)
and its value as a JSON file, then `scored` and its file. What a first run of
`barca get scored pipeline.py` computes and keeps, without caching, planning, workers or
records: a first run on 2 cores can at best take half of this loop's time, and what it takes
beyond that is barca's own cost (issue 28).

    python benchmarks/plain_loop.py WAREHOUSE_DIR OUT_DIR   # OUT_DIR must not exist

benchmarks/user_rows.py times it as a whole process beside barca's first run, taken in turn.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb


def write(path: Path, value: dict) -> None:
    with open(path, "w") as fh:
        json.dump(value, fh)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.split("\n\n")[2], file=sys.stderr)
        return 2
    warehouse, out = Path(argv[0]) / "warehouse.duckdb", Path(argv[1])
    con = duckdb.connect(str(warehouse), read_only=True)
    versions = dict(con.execute(
        "select retailer, max(updated_at)::varchar from orders group by retailer").fetchall())
    (out / "cleaned").mkdir(parents=True)
    (out / "scored").mkdir()
    for retailer, as_of in versions.items():
        orders = con.execute("select * from orders where retailer = ?", [retailer]).df()
        cleaned = {"retailer": retailer, "rows": len(orders), "as_of": as_of}
        write(out / "cleaned" / f"{retailer}.json", cleaned)
        write(out / "scored" / f"{retailer}.json", {**cleaned, "score": cleaned["rows"] * 0.1})
    con.close()
    print(f"{len(versions)} retailers: {out}/cleaned and {out}/scored")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
