"""`barca doctor`: every prerequisite checked, each failure named with its fix, exit 3."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from conftest import barca, write

GOOD = """
    import pandas as pd
    from barca import asset

    @asset()
    def table() -> pd.DataFrame:
        return pd.DataFrame({"x": [1]})
"""


def _checks(result) -> dict[str, dict]:
    return {c["name"]: c for c in result.json["checks"]}


def test_healthy_project_passes_every_check_and_creates_nothing(project: Path) -> None:
    write(project, {"pipeline.py": GOOD})
    result = barca(project, "doctor").expect(0)
    assert result.json["ok"] is True
    checks = _checks(result)
    assert list(checks) == ["python", "barca", "project", "config", "sources", "top_level",
                            "packages", "cache", "metadata", "warm"]
    assert all(c["ok"] for c in checks.values())
    assert checks["python"]["data"]["executable"] == sys.executable
    # the install built the compiled module (setup.py), which packs keyed sources
    assert checks["barca"]["data"]["compiled"] is True
    assert "keys packed in C" in checks["barca"]["detail"]
    assert checks["sources"]["data"] == {"files": ["pipeline.py"], "nodes": 1}
    assert checks["packages"]["data"]["needed"] == ["pandas"]
    assert checks["cache"]["data"]["exists"] is False
    assert checks["metadata"]["data"]["exists"] is False
    assert not (project / ".barca").exists()


def test_after_a_run_the_cache_and_schema_are_checked(project: Path) -> None:
    write(project, {"pipeline.py": GOOD})
    barca(project, "get", "pipeline.py").expect(0)
    checks = _checks(barca(project, "doctor").expect(0))
    assert checks["cache"]["data"]["exists"] is True and checks["cache"]["ok"]
    assert checks["metadata"]["data"]["schema_version"] == checks["metadata"]["data"][
        "expected"]
    assert "1 run recorded" in checks["metadata"]["detail"]
    out = barca(project, "doctor", "--pretty").expect(0).stdout.splitlines()
    assert [line.split(":")[0] for line in out] == ["[ok] python", "[ok] barca", "[ok] project",
                                                    "[ok] config", "[ok] sources",
                                                    "[ok] top_level", "[ok] packages",
                                                    "[ok] cache", "[ok] metadata",
                                                    "[ok] warm"]


def test_missing_package_of_an_annotation_or_import_is_named_with_the_fix(
        project: Path) -> None:
    write(project, {"pipeline.py": """
        from barca import asset
        import framekit as fk
        try:
            import optional_thing
        except ImportError:
            optional_thing = None
        import helpers

        @asset()
        def table() -> fk.Table:
            return helpers.make()
    """, "helpers.py": "def make():\n    return 1\n"})
    result = barca(project, "doctor").expect(3)
    packages = _checks(result)["packages"]
    assert packages["ok"] is False and packages["data"]["missing"] == ["framekit"]
    assert "framekit is not installed" in packages["detail"]
    assert "pip install framekit" in packages["fix"]
    assert result.json["ok"] is False
    assert result.envelope["kind"] == "infra" and "packages" in result.envelope["error"]
    human = barca(project, "doctor", "--pretty").expect(3)
    assert "[error] packages: framekit is not installed" in human.stdout
    assert "fix: install them into" in human.stdout


def test_unparsable_source_fails_the_sources_check(project: Path) -> None:
    write(project, {"pipeline.py": "from barca import asset\n\n@asset(\ndef broken(:\n"})
    checks = _checks(barca(project, "doctor").expect(3))
    assert checks["sources"]["ok"] is False and "pipeline.py" in checks["sources"]["detail"]
    assert checks["python"]["ok"] and checks["metadata"]["ok"]


def test_newer_metadata_schema_is_reported_not_migrated(project: Path) -> None:
    write(project, {"pipeline.py": GOOD})
    barca(project, "get", "pipeline.py").expect(0)
    db = project / ".barca" / "metadata.db"
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")  # as a future barca would leave it
    conn.close()
    metadata = _checks(barca(project, "doctor").expect(3))["metadata"]
    assert metadata["ok"] is False and "schema version 99" in metadata["detail"]
    assert metadata["fix"]
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 99
    conn.close()


def test_unwritable_state_directory_fails_the_cache_check(project: Path) -> None:
    write(project, {"pipeline.py": GOOD})
    barca(project, "get", "pipeline.py").expect(0)
    state = project / ".barca"
    state.chmod(0o500)
    try:
        if _can_write(state):
            pytest.skip("running as root: directory permissions do not stop writes")
        cache = _checks(barca(project, "doctor").expect(3))["cache"]
        assert cache["ok"] is False and "not writable" in cache["detail"]
    finally:
        state.chmod(0o700)


def test_a_file_where_barca_needs_a_directory_fails_the_cache_check(project: Path) -> None:
    write(project, {"pipeline.py": GOOD})
    (project / ".barca").write_text("not a directory")
    cache = _checks(barca(project, "doctor").expect(3))["cache"]
    assert cache["ok"] is False and "is not a directory" in cache["detail"]
    assert cache["fix"].startswith("move ")


def _can_write(folder: Path) -> bool:
    probe = folder / "probe"
    try:
        probe.write_text("")
    except OSError:
        return False
    probe.unlink()
    return True


def test_bad_environment_name_is_exit_2(project: Path) -> None:
    write(project, {"pipeline.py": GOOD})
    bad = barca(project, "doctor", "--env", "../up").expect(2)
    assert "invalid environment name" in bad.envelope["error"]
