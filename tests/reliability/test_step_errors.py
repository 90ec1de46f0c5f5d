"""Results barca cannot store (issue 13, item 15), on the real CLI: the step fails naming the
type that could not be stored and what to return instead, and its traceback has no frame of
barca's own code (the user's code did not raise; barca's pickle call is not theirs to read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, write


@pytest.mark.parametrize("body, named, fix", [
    ("return lambda row: row * 2", "function", "return the data"),
    ("return open(__file__)", "TextIOWrapper", "contents"),
    ("return (n * 2 for n in range(3))", "generator", "list("),
    ("return {'rows': [1, (n for n in range(3))]}", "generator", "list("),
])
def test_an_unpicklable_result_names_its_type_and_the_fix(project: Path, body: str, named: str,
                                                          fix: str):
    write(project, {"p.py": f"""
    from barca import asset

    @asset()
    def out():
        {body}
    """})
    result = barca(project, "get", "out", "p.py").expect(1)
    envelope = result.envelope
    assert envelope["node"] == "p.py:out"
    assert named in envelope["error"] and fix in envelope["error"]
    assert "/barca/" not in (envelope["traceback"] or "")
    assert "/barca/" not in result.stderr
    history = barca(project, "history", result.json["run_id"]).expect(0).json
    step = history["steps"][0]
    assert step["status"] == "failed" and named in step["error"]
    assert "/barca/" not in (step["error_traceback"] or "")


def test_a_value_json_cannot_hold_under_serializer_json_names_the_fix(project: Path):
    write(project, {"p.py": """
    from barca import asset

    @asset(serializer="json")
    def out():
        return {1, 2}
    """})
    envelope = barca(project, "get", "out", "p.py").expect(1).envelope
    assert "set" in envelope["error"] and 'serializer="json"' in envelope["error"]
    assert "/barca/" not in (envelope["traceback"] or "")


def test_a_table_parquet_cannot_hold_names_the_column_problem_and_pickle(project: Path):
    write(project, {"p.py": """
    import pandas as pd
    from barca import asset

    @asset()
    def out() -> pd.DataFrame:
        return pd.DataFrame({"a": [1, "x"]})
    """})
    envelope = barca(project, "get", "out", "p.py").expect(1).envelope
    assert "DataFrame" in envelope["error"] and "parquet" in envelope["error"]
    assert 'serializer="pickle"' in envelope["error"]
    assert "/barca/" not in (envelope["traceback"] or "")


def test_an_error_raised_by_the_values_own_pickling_is_named(project: Path):
    write(project, {"p.py": """
    from barca import asset

    class Handle:
        def __reduce__(self):
            raise ValueError("handles cannot travel")

    @asset()
    def out():
        return Handle()
    """})
    envelope = barca(project, "get", "out", "p.py").expect(1).envelope
    assert "Handle" in envelope["error"] and "handles cannot travel" in envelope["error"]
    assert "/barca/" not in (envelope["traceback"] or "")
