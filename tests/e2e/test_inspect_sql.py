"""`barca sql`: one DuckDB view per node with a JSON or parquet result; errors are exit 2.

The results are computed once for the module; `barca sql` runs in this process
(`barca_here`) but for the first test, which runs the real command."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import barca, barca_here, edit, write

PIPELINE = """
    import pandas as pd
    from barca import asset, partitions, partitions_from, sensor, task

    @asset()
    def orders() -> list:
        return [{"customer": "ada", "amount": 120.0}, {"customer": "bob", "amount": 80.5}]

    @asset(inputs={"orders": orders})
    def summary(orders: list) -> dict:
        return {"revenue": sum(o["amount"] for o in orders), "n": len(orders)}

    @asset()
    def sizes() -> list:
        return [3, 1, 2]

    @asset(partitions={"region": partitions(["emea", "amer", "apac"])})
    def sales(region: str) -> pd.DataFrame:
        return pd.DataFrame({"units": [len(region), 10]})

    @sensor()
    def retailers() -> dict:
        return {"r1": "v1", "r2": "v1"}

    @asset(partitions={"retailer": partitions_from(retailers)})
    def scored(retailer: str, retailers: str) -> dict:
        return {"retailer": retailer, "as_of": retailers}

    @asset()
    def lookup() -> set:
        return {"a", "b"}

    @asset()
    def never() -> int:
        return 1

    @task(inputs={"summary": summary})
    def report(summary: dict) -> str:
        return "sent"
"""


@pytest.fixture(scope="module")
def computed(tmp_path_factory) -> Path:
    """The pipeline's results, computed once for the module (pandas makes each run slow)."""
    root = write(tmp_path_factory.mktemp("sql"), {"barca.toml": "", "pipeline.py": PIPELINE})
    for target in ("summary", "sizes", "sales", "scored", "lookup"):
        barca(root, "get", target, "pipeline.py").expect(0)
    return root


@pytest.fixture
def project_with_results(computed: Path, tmp_path: Path) -> Path:
    """A copy of the computed project of this test's own (some tests edit the pipeline)."""
    return Path(shutil.copytree(computed, tmp_path / "p"))


def _rows(root: Path, query: str, *args: str) -> list[dict]:
    return barca_here(root, "sql", query, *args).expect(0).json["rows"]


def test_each_node_is_a_view_named_after_its_function(project_with_results: Path) -> None:
    root = project_with_results
    body = barca(root, "sql", "select * from orders order by amount").expect(0).json
    assert body["columns"] == ["customer", "amount"]
    assert body["rows"] == [{"customer": "bob", "amount": 80.5},
                            {"customer": "ada", "amount": 120.0}]
    assert body["total"] == 2 and body["truncated"] is False
    assert _rows(root, "select revenue, n from summary") == [{"revenue": 200.5, "n": 2}]


def test_json_list_of_scalars_is_one_column_named_json(project_with_results: Path) -> None:
    assert _rows(project_with_results, "select json from sizes order by json") == [
        {"json": 1}, {"json": 2}, {"json": 3}]


def test_partitioned_node_has_a_leading_partition_column(project_with_results: Path) -> None:
    body = barca_here(project_with_results, "sql", "select * from sales").expect(0).json
    assert body["columns"] == ["partition", "units"]
    assert {r["partition"] for r in body["rows"]} == {"region=emea", "region=amer",
                                                      "region=apac"}
    totals = _rows(project_with_results,
                   "select partition, sum(units) as units from sales group by 1 order by 1")
    assert totals == [{"partition": "region=amer", "units": 14},
                      {"partition": "region=apac", "units": 14},
                      {"partition": "region=emea", "units": 14}]
    keyed = _rows(project_with_results, "select partition, retailer, as_of from scored "
                                        "order by 1")
    assert keyed == [{"partition": "retailer=r1", "retailer": "r1", "as_of": "v1"},
                     {"partition": "retailer=r2", "retailer": "r2", "as_of": "v1"}]


def test_removed_keys_leave_the_view(project_with_results: Path) -> None:
    root = project_with_results
    edit(root / "pipeline.py", '["emea", "amer", "apac"]', '["emea", "amer"]')
    assert {r["partition"] for r in _rows(root, "select partition from sales")} == {
        "region=emea", "region=amer"}


def test_view_reads_the_latest_success_even_when_stale(project_with_results: Path) -> None:
    root = project_with_results
    edit(root / "pipeline.py", '"n": len(orders)', '"n": len(orders) + 100')
    assert _rows(root, "select n from summary") == [{"n": 2}]
    barca(root, "get", "summary", "pipeline.py").expect(0)
    assert _rows(root, "select n from summary") == [{"n": 102}]


def test_limit_and_all_bound_the_rows(project_with_results: Path) -> None:
    root = project_with_results
    body = barca_here(root, "sql", "select * from range(250)").expect(0).json
    assert len(body["rows"]) == 100 and body["total"] == 250 and body["truncated"] is True
    assert body["hint"] == "pass --limit N for more, or --all for all 250 rows"
    assert len(barca_here(root, "sql", "select * from range(250)", "--limit", "7").expect(0)
               .json["rows"]) == 7
    assert len(barca_here(root, "sql", "select * from range(250)", "--all").expect(0)
               .json["rows"]) == 250
    table = barca_here(root, "sql", "select * from range(250)", "--pretty", "-l", "3").expect(0)
    assert table.stdout.splitlines() == ["range", "0", "1", "2"]
    assert "showing 3 of 250 rows" in table.stderr


def test_values_are_json_friendly(project_with_results: Path) -> None:
    row = _rows(project_with_results, "select date '2026-01-02' as d, 'nan'::double as n, "
                                      "1.25::decimal(5,2) as m, '\\x0a'::blob as b")[0]
    assert row == {"d": "2026-01-02", "n": None, "m": 1.25, "b": "0a"}


def test_show_tables_lists_every_queryable_view(project_with_results: Path) -> None:
    names = {r["name"] for r in _rows(project_with_results, "show tables")}
    assert names == {"orders", "summary", "sizes", "sales", "retailers", "scored"}


def test_pickled_result_is_exit_2_saying_so(project_with_results: Path) -> None:
    bad = barca_here(project_with_results, "sql", "select * from lookup").expect(2)
    assert "stored as a pickle" in bad.envelope["error"]
    assert "parquet or JSON" in bad.envelope["remediation"]


def test_node_without_a_result_names_the_command_to_run(project_with_results: Path) -> None:
    bad = barca_here(project_with_results, "sql", "select * from never", "pipeline.py").expect(2)
    assert "has no stored result" in bad.envelope["error"]
    assert bad.envelope["remediation"] == "compute it with: barca get never pipeline.py"
    task = barca_here(project_with_results, "sql", "select * from report").expect(2)
    assert task.envelope["remediation"] == "compute it with: barca run report"


def test_unknown_view_and_bad_sql_are_exit_2_listing_views(project_with_results: Path) -> None:
    unknown = barca_here(project_with_results, "sql", "select * from nowhere").expect(2)
    assert unknown.envelope["error"] == "unknown view 'nowhere'"
    assert unknown.envelope["remediation"].startswith("views: orders, retailers, sales")
    syntax = barca_here(project_with_results, "sql", "selec 1").expect(2)
    assert syntax.envelope["error"].startswith("SQL error: Parser Error")
    assert "views:" in syntax.envelope["remediation"]
    human = barca_here(project_with_results, "sql", "selec 1", "--pretty").expect(2)
    assert "Traceback" not in human.stderr and human.stdout == ""


def test_name_clash_names_views_by_full_id(project: Path) -> None:
    write(project, {"a.py": "from barca import asset\n\n@asset()\ndef total() -> dict:\n"
                            "    return {'v': 1}\n",
                    "b.py": "from barca import asset\n\n@asset()\ndef total() -> dict:\n"
                            "    return {'v': 2}\n"})
    barca(project, "get", "a.py", "b.py").expect(0)
    result = barca_here(project, "sql", 'select v from "b.py:total"').expect(0)
    assert result.json["rows"] == [{"v": 2}]
    assert "named by full id" in result.stderr


def test_no_results_yet_creates_nothing(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    bad = barca_here(project, "sql", "select * from orders").expect(2)
    assert "no stored result" in bad.envelope["error"]
    assert barca_here(project, "sql", "select 42 as x").expect(0).json["rows"] == [{"x": 42}]
    assert not (project / ".barca").exists()
