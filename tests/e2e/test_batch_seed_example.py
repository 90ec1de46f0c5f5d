"""The seed's batching example, end to end: 20 retailers, a `retailer_versions` sensor, `orders`
and `scored` with `batch="all"`; after a first run (one call of 20 keys per asset), 3 retailers
change and the dry run, the run's output and `history RUN_ID` take exactly the shapes the seed
shows (`../shared/seeds/002`): the WHY column ending "3 keys in 1 call (batch=all)", "7 will run,
34 cached, 0 unknown", the `[batch=b1]` output line, one `[barca] batch:` line per asset before
the end-of-run line and the metadata line after it, "(7 steps, 2 phases)", and history's
`scored[3 keys]` row with `-` and `batch b2` above its keys.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import barca, write

PIPELINE = """
    import json
    from pathlib import Path
    from barca import asset, partitions_from, sensor

    @sensor()
    def retailer_versions() -> dict:
        return json.loads(Path("versions.json").read_text())

    @asset(partitions={"retailer": partitions_from(retailer_versions)}, batch="all")
    def orders(retailer: list[str], retailer_versions: dict) -> dict:
        print(f"reading orders of {len(retailer)} retailers")
        return {r: {"retailer": r, "version": retailer_versions[r]} for r in retailer}

    @asset(partitions={"retailer": partitions_from(orders)}, batch="all")
    def scored(retailer: list[str], orders: dict[str, dict]) -> dict:
        return {r: {**orders[r], "score": len(orders[r]["version"])} for r in retailer}
"""

RETAILERS = [f"r{i:02d}" for i in range(1, 21)]
CHANGED = ["r03", "r11", "r17"]
NUMBER = r"[0-9]+\.[0-9]s"


def _rows(text: str) -> list[list[str]]:
    """A human table's rows, cells split on runs of two or more spaces."""
    return [re.split(r"\s{2,}", line.strip()) for line in text.splitlines() if line.strip()]


def test_three_changed_retailers_of_twenty_give_the_seeds_shapes(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    versions = {r: "v1" for r in RETAILERS}
    (project / "versions.json").write_text(json.dumps(versions))
    first = barca(project, "get", "scored", "pipeline.py", "--pretty").expect(0)
    assert "[barca] batch:pipeline.py:orders 1 call, 20 keys |" in first.stderr
    versions.update(dict.fromkeys(CHANGED, "v22"))
    (project / "versions.json").write_text(json.dumps(versions))

    dry = barca(project, "get", "scored", "pipeline.py", "--dry-run", "--pretty").expect(0)
    rows = _rows(dry.stdout)
    assert rows[0] == ["Dry run: barca get scored (nothing executed, nothing written)"]
    assert rows[1] == ["STATUS", "WHY", "STEP"]
    assert rows[2] == ["will run", "sensors always re-run", "pipeline.py:retailer_versions"]
    cause = {"orders": "value pipeline.py:retailer_versions changed",
             "scored": "input pipeline.py:orders changed"}
    for row, node in zip(rows[3:5], ("orders", "scored")):
        keys = ", ".join(f"retailer={r} ({cause[node]})" for r in CHANGED)
        assert row == ["partial", f"17 of 20 keys cached; will run: {keys}; 3 keys in 1 call "
                       "(batch=all)", f"pipeline.py:{node}"]
    assert rows[5] == ["7 will run, 34 cached, 0 unknown"]

    run = barca(project, "get", "scored", "pipeline.py", "--pretty").expect(0)
    stderr = [line for line in run.stderr.splitlines() if line.strip()]
    assert stderr[0] == "[pipeline.py:orders[batch=b1]] reading orders of 3 retailers"
    parts = ", ".join(f"{p} {NUMBER}" for p in ("import", "load", "compute", "split", "write"))
    assert re.fullmatch(rf"\[barca\] batch:pipeline.py:orders 1 call, 3 keys \| {parts}",
                        stderr[1]), stderr
    assert re.fullmatch(rf"\[barca\] batch:pipeline.py:scored 1 call, 3 keys \| {parts}",
                        stderr[2]), stderr
    assert re.fullmatch(rf"\[barca\] 7/41 steps \| done in {NUMBER}", stderr[3]), stderr
    assert re.fullmatch(rf"\[barca\] metadata {NUMBER} recording this run's results",
                        stderr[4]), stderr
    head = re.match(r"Run ([0-9a-f]{12}) \| got 'scored' in [0-9.]+s \(7 steps, 2 phases\)",
                    run.stdout)
    assert head, run.stdout

    history = barca(project, "history", head.group(1), "--pretty").expect(0)
    table = _rows(history.stdout[history.stdout.index("STEP "):])
    assert table[0] == ["STEP", "STATUS", "ATTEMPTS", "TIME", "PEAK_RSS", "RUN_HASH",
                        "ARTIFACT"]
    assert table[1][:2] == ["pipeline.py:retailer_versions", "success"]
    for i, node, call in ((2, "orders", "b1"), (6, "scored", "b2")):
        assert table[i][:3] == [f"pipeline.py:{node}[3 keys]", "success", "1"]
        assert table[i][4].endswith("MB") and table[i][5:] == ["-", f"batch {call}"]
        for row, retailer in zip(table[i + 1:i + 4], CHANGED):
            assert row[:2] == [f"pipeline.py:{node}[retailer={retailer}]", "success"]
            assert row[4] == "-" and re.fullmatch(r"[0-9a-f]{12}", row[5])
            # each key's small result is a range of a pack of its node (store.packs)
            assert re.fullmatch(rf"\.barca/artifacts/pipeline\.py--{node}/[0-9a-f]{{16}}\.pack"
                                rf"@\d+:\d+ \(json, \d+ B\)", row[6]), row[6]
    assert len(table) == 10
