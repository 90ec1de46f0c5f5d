"""`get -o value|path|json|pretty` and `--fields` on the real CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import barca, result_bytes, write

PIPELINE = """
from barca import asset, partitions

@asset()
def orders() -> list:
    return [1, 2, 3]

@asset(partitions={"region": partitions(["emea", "amer"])})
def sales(region: str) -> dict:
    return {"region": region}

@asset(inputs={"orders": orders})
def summary(orders: list) -> dict:
    return {"n": len(orders)}
"""


def test_output_value_prints_only_the_value(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    one = barca(project, "get", "summary", "pipeline.py", "-o", "value").expect(0)
    assert json.loads(one.stdout) == {"n": 3}
    keyed = barca(project, "get", "sales", "pipeline.py", "--output", "value").expect(0)
    assert json.loads(keyed.stdout) == {"region=amer": {"region": "amer"},
                                        "region=emea": {"region": "emea"}}
    several = barca(project, "get", "summary,orders", "pipeline.py", "-o", "value").expect(0)
    assert json.loads(several.stdout) == {"summary": {"n": 3}, "orders": [1, 2, 3]}
    dry = barca(project, "get", "summary", "pipeline.py", "--dry-run", "-o", "value").expect(0)
    assert [s["action"] for s in json.loads(dry.stdout)] == ["cached", "cached"]


def test_output_path_prints_one_result_file_per_key(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    paths = barca(project, "get", "sales", "pipeline.py", "-o", "path").expect(0)
    lines = paths.stdout.splitlines()
    assert len(lines) == 2
    values = [json.loads(result_bytes(project, line)) for line in lines]  # ranges of packs
    assert values == [{"region": "amer"}, {"region": "emea"}]  # in key order
    one = barca(project, "get", "summary", "pipeline.py", "-o", "path").expect(0)
    assert json.loads((project / one.stdout.strip()).read_text()) == {"n": 3}
    sub = project / "sub"
    sub.mkdir()
    there = barca(sub, "get", "summary", "../pipeline.py", "-o", "path").expect(0)
    assert Path(there.stdout.strip()).is_absolute() and Path(there.stdout.strip()).exists()
    refused = barca(project, "get", "summary", "pipeline.py", "-o", "path", "--dry-run")
    assert refused.expect(2).envelope["kind"] == "usage"


def test_output_json_and_pretty_and_conflicts(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    body = barca(project, "get", "summary", "pipeline.py", "-o", "json").expect(0).json
    assert body["final_output"] == {"n": 3}
    pretty = barca(project, "get", "summary", "pipeline.py", "-o", "pretty").expect(0)
    assert pretty.stdout.startswith("Run ")
    both = barca(project, "get", "summary", "pipeline.py", "-o", "value", "--pretty").expect(2)
    assert "-o cannot be combined with --json or --pretty" in both.stderr
    bad = barca(project, "get", "summary", "pipeline.py", "-o", "yaml").expect(2)
    assert bad.envelope["kind"] == "usage"


def test_fields_keeps_only_those_keys_of_each_step(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "summary", "pipeline.py", "--fields", "colour").expect(2)
    assert not (project / ".barca").exists()  # checked before anything runs
    body = barca(project, "get", "summary", "pipeline.py", "--fields", "id,status").expect(0)
    assert [set(s) for s in body.json["steps"]] == [{"id", "status"}] * 2
    assert body.json["final_output"] == {"n": 3}  # only the steps are trimmed
    dry = barca(project, "get", "summary", "pipeline.py", "--dry-run", "--fields",
                "id,action").expect(0).json
    assert [set(s) for s in dry["steps"]] == [{"id", "action"}] * 2
    unknown = barca(project, "get", "summary", "pipeline.py", "--fields", "id,colour")
    assert "valid fields" in unknown.expect(2).envelope["remediation"]
    for flags in (["--pretty"], ["-o", "value"], ["-o", "path"]):
        refused = barca(project, "get", "summary", "pipeline.py", "--fields", "id", *flags)
        assert refused.expect(2).envelope["kind"] == "usage"


MANY_KEYS = """
from barca import asset, partitions

KEYS = [f"k{i:04d}" for i in range(1002)]

@asset(partitions={"k": partitions(KEYS)})
def up(k: str) -> dict:
    if k == "k0007":
        raise ValueError("bad key")
    return {"k": k}

@asset(inputs={"up": up}, partitions={"k": partitions(KEYS)})
def down(k: str, up: dict) -> dict:
    return up

@asset(partitions={"k": partitions(KEYS[:1000])})
def thousand(k: str) -> int:
    return 1
"""


def test_past_1000_keys_the_default_json_summarises_the_keys_without_reading_them(
        project: Path) -> None:
    write(project, {"pipeline.py": MANY_KEYS})
    assert len(barca(project, "get", "thousand", "pipeline.py").expect(0).json[
        "final_output"]) == 1000  # up to 1,000 keys: every value, as before
    failed = barca(project, "get", "down", "pipeline.py").expect(1).json["final_output"]
    summary = failed["_barca_partitions"]
    assert (summary["keys"], summary["computed"], summary["cached"], summary["failed"],
            summary["blocked"]) == (1001, 1001, 0, 0, 1)
    first = [f"k=k{i:04d}" for i in range(21) if i != 7][:20]
    assert summary["first_keys"] == first and summary["computed_keys"] == first
    assert summary["truncated"] is True and "-o value" in summary["hint"]
    up = barca(project, "get", "up", "pipeline.py").expect(1).json["final_output"]
    assert up["_barca_partitions"]["failed"] == 1 and up["_barca_partitions"]["keys"] == 1001

    # the summary opens no result: it holds with every result file of `down` overwritten
    for path in (project / ".barca" / "artifacts").glob("pipeline.py--down/*"):
        path.write_text("not json")
    again = barca(project, "get", "down", "pipeline.py").expect(1).json
    assert again["final_output"]["_barca_partitions"]["cached"] == 1001
    assert again["final_output"]["_barca_partitions"]["computed"] == 0


DICT_SOURCE = """
from pathlib import Path
from barca import asset, partitions_from, sensor

@sensor()
def versions() -> dict:  # a dict in descending order: its keys are kept sorted
    changed = Path("changed.txt").read_text()
    return {f"k{i:04d}": changed if i == 3 else "v1" for i in reversed(range(1500))}

@asset(partitions={"k": partitions_from(versions)})
def scored(k: str, versions: str) -> dict:
    if k == "k0001":
        raise ValueError("bad key")
    return {"k": k, "v": versions}
"""


def test_a_dict_sources_summary_lists_its_smallest_keys_on_a_first_run_and_a_tick(
        project: Path) -> None:
    """The first keys of a dict source's summary are read off the front of its sorted keys
    (run_values.label_order): the smallest labels, whatever the dict's own order, both when
    the sensor's step sent the keys and when a tick rebuilt them from the stored chunks."""
    write(project, {"pipeline.py": DICT_SOURCE, "changed.txt": "v1"})
    expected = [f"k=k{i:04d}" for i in range(22) if i != 1][:20]
    first = barca(project, "get", "scored", "pipeline.py").expect(1).json["final_output"]
    assert first["_barca_partitions"]["first_keys"] == expected
    assert first["_barca_partitions"]["computed"] == 1499
    (project / "changed.txt").write_text("v2")
    tick = barca(project, "get", "scored", "pipeline.py").expect(1).json["final_output"]
    summary = tick["_barca_partitions"]
    assert summary["first_keys"] == expected
    assert (summary["computed"], summary["failed"]) == (1, 1)  # k0003 again, k0001 still bad
    assert summary["computed_keys"] == ["k=k0003"]


def test_json_with_o_value_or_path_gives_every_key_and_a_partition_every_selected_key(
        project: Path) -> None:
    write(project, {"pipeline.py": MANY_KEYS.replace('k == "k0007"', "False")})
    body = barca(project, "get", "down", "pipeline.py", "--json", "-o", "value").expect(0).json
    assert len(body["final_output"]) == 1002 and body["final_output"]["k=k0500"] == {"k": "k0500"}
    assert body["steps"]  # the whole JSON, its final_output holding every value
    paths = barca(project, "get", "down", "pipeline.py", "--json", "-o", "path").expect(0).json
    assert len(paths["final_output"]) == 1002
    assert json.loads(result_bytes(project, paths["final_output"]["k=k0003"])) == {"k": "k0003"}
    assert barca(project, "get", "down", "pipeline.py", "-o", "path").expect(0).stdout \
        .splitlines() == list(paths["final_output"].values())
    chosen = barca(project, "get", "down", "pipeline.py", "--partition",
                   "k=" + ",".join(f"k{i:04d}" for i in range(1002))).expect(0).json
    assert len(chosen["final_output"]) == 1002  # --partition: every selected key's value
    dry = barca(project, "get", "down", "pipeline.py", "--json", "-o", "value", "--dry-run")
    assert dry.expect(2).envelope["kind"] == "usage"


TABLES = """
from barca import asset, partitions

@asset()
def orders() -> list:
    return [{"customer": f"c{i:02}", "amount": float(i)} for i in range(25)]

@asset(inputs={"orders": orders})
def big_orders(orders: list) -> "pyarrow.Table":
    import pyarrow as pa
    return pa.Table.from_pylist([o for o in orders if o["amount"] >= 5])
"""

KEYED_TABLES = TABLES + """
@asset(partitions={"region": partitions(["emea", "amer"])})
def regional(region: str) -> "pyarrow.Table":
    import pyarrow as pa
    return pa.Table.from_pylist([{"region": region}])
"""


def test_pretty_get_without_a_target_names_the_value_and_previews_a_table(project: Path
                                                                          ) -> None:
    """`barca get FILE --pretty` says which node's value it prints (barca chose it), and a
    parquet value shows as its first rows and shape, never the `_barca_artifact` pointer
    (which the JSON keeps, for scripts)."""
    write(project, {"pipeline.py": TABLES})
    out = barca(project, "get", "pipeline.py", "--pretty").expect(0).stdout
    lines = out.splitlines()
    label = lines.index("Value of 'big_orders' (the last asset; name a target to choose "
                        "another):")
    assert re.fullmatch(r"parquet table, 20 rows x 2 columns, [\d,]+ bytes", lines[label + 1])
    assert lines[label + 2].startswith("file: .barca/artifacts/") and \
        lines[label + 2].endswith(".parquet")
    assert lines[label + 3].split() == ["customer", "amount"]
    assert [row.split() for row in lines[label + 4:label + 14]] == [
        [f"c{i:02}", f"{float(i)}"] for i in range(5, 15)]
    assert lines[label + 14] == "... 10 more rows (-o path gives the file; barca sql queries it)"
    assert "_barca_artifact" not in out
    named = barca(project, "get", "big_orders", "pipeline.py", "--pretty").expect(0).stdout
    assert "\nValue:\nparquet table, 20 rows x 2 columns" in named
    as_json = barca(project, "get", "big_orders", "pipeline.py").expect(0).json
    assert as_json["final_output"]["_barca_artifact"]["format"] == "parquet"


def test_pretty_get_of_keyed_tables_gives_each_key_s_file(project: Path) -> None:
    write(project, {"pipeline.py": KEYED_TABLES})
    out = barca(project, "get", "regional", "pipeline.py", "--pretty").expect(0).stdout
    keyed = out.split("\nValue:\n", 1)[1].splitlines()
    assert [line.split(": ", 1)[0] for line in keyed] == ["region=amer", "region=emea"]
    assert all(" (parquet, " in line and line.endswith(" bytes)") for line in keyed)
    assert "_barca_artifact" not in out
