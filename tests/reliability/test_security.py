"""Security cases of issue 13, each as it was found, on the real CLI: a node name that leads
out of the project, and `barca sql` reaching the filesystem or the metadata database."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, write

ESCAPING = """
    from barca import asset

    @asset(name="x/../../../{target}")
    def escaped() -> int:
        return 1
"""


@pytest.mark.parametrize("name", ["x/../../../{target}", "../up", "a.b", "1st", "with-dash"])
def test_a_node_name_must_be_an_identifier_and_nothing_is_written(project: Path, tmp_path, name):
    target = tmp_path / "ESCAPED"
    write(project, {"p.py": ESCAPING.replace('x/../../../{target}', name.format(
        target=target))})
    result = barca(project, "get", "p.py").expect(2)
    assert result.envelope["kind"] == "usage"
    assert "name=" in result.envelope["error"] and "identifier" in result.envelope["error"]
    assert not target.exists() and not (project / ".barca" / "artifacts").exists()


SQL_PIPELINE = """
    from barca import asset

    @asset()
    def orders() -> list:
        return [{"customer": "ada", "amount": 120.0}]
"""


@pytest.fixture
def computed(project: Path) -> Path:
    write(project, {"p.py": SQL_PIPELINE})
    barca(project, "get", "orders", "p.py").expect(0)
    return project


@pytest.mark.parametrize("query", [
    "copy (select 1) to '.barca/metadata.db'",
    "copy (select 1 as customer) to '{artifact}' (USE_TMP_FILE false)",
    "select * from read_text('/etc/passwd')",
    "select * from read_csv_auto('{outside}')",
    "copy (select 1) to '{outside}'",
    "attach '{outside}.db' as other",
    "install httpfs",
    "load httpfs",
    "set enable_external_access = true",
    "create table t as select 1",
    "select 1; copy (select 1) to '{outside}'",
])
def test_sql_cannot_reach_files_or_write_anything(computed: Path, tmp_path, query):
    artifact = next((computed / ".barca" / "artifacts").rglob("*.json"))
    before = artifact.read_bytes()
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    written = query.format(artifact=artifact, outside=outside)
    result = barca(computed, "sql", written).expect(2)
    assert result.envelope["kind"] == "usage"
    assert artifact.read_bytes() == before
    assert outside.read_text() == "a\n1\n" and not Path(f"{outside}.db").exists()
    # the metadata is intact: the result is still served from cache
    again = barca(computed, "get", "orders", "p.py").expect(0).json
    assert again["steps_executed"] == 0 and again["final_output"][0]["customer"] == "ada"


def test_sql_still_reads_the_views(computed: Path):
    rows = barca(computed, "sql", "select customer from orders").expect(0).json["rows"]
    assert rows == [{"customer": "ada"}]
    tables = barca(computed, "sql", "show tables").expect(0).json["rows"]
    assert {"name": "orders"} in tables
