"""What a newcomer sees when a run fails: one failure headline, the error once; an import-time
error of a pipeline file named by its file and line, and found by `barca doctor`."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, write

FAILING = """
from barca import asset

@asset()
def orders() -> list:
    return [1, 2, 3]

@asset(inputs={"orders": orders})
def summary(orders: list) -> dict:
    raise ValueError("boom here")

@asset(inputs={"summary": summary})
def report(summary: dict) -> dict:
    return summary
"""

NO_IMPORT = """
from barca import asset

FRAME = pandas.DataFrame({"a": [1]})

@asset()
def orders() -> list:
    return [1, 2, 3]
"""

OTHER = """
from barca import asset

@asset()
def unrelated() -> int:
    return 1
"""


def test_failed_run_has_one_failure_headline_and_the_error_once(project: Path) -> None:
    write(project, {"pipeline.py": FAILING})
    result = barca(project, "get", "report", "pipeline.py", "--pretty").expect(1)
    assert result.stdout.splitlines()[0].startswith("Run ")
    assert "failed after" in result.stdout and "got " not in result.stdout
    assert "(3 keys: 1 ran, 1 failed, 1 blocked)" in result.stdout  # keys, not nodes
    both = result.stdout + result.stderr
    assert both.count("boom here") == 2  # the raising source line and the error, once each
    assert both.count("ValueError: boom here") == 1
    assert result.stderr.count("[barca] run failed: step 'pipeline.py:summary' failed "
                               "(exit 1)") == 1
    assert result.stderr.count("Traceback (most recent call last)") == 1
    assert result.stderr.rstrip().splitlines()[-1].strip().startswith("fix the step")


KEYED_FAILING = """
from barca import asset, partitions

@asset(partitions={"k": partitions([f"k{i:02}" for i in range(10)])})
def raw(k: str) -> int:
    if k == "k03":
        raise ValueError("bad key")
    return int(k[1:])

@asset(inputs={"raw": raw}, partitions={"k": partitions([f"k{i:02}" for i in range(10)])})
def doubled(raw: int, k: str) -> int:
    return raw * 2
"""


def test_failed_run_summary_counts_keys_as_the_progress_bar_does(project: Path) -> None:
    """One failed key of ten, its reader's key blocked: the summary line counts the keys
    (the bar above it counts keys), never the two nodes as "2 failed"."""
    write(project, {"pipeline.py": KEYED_FAILING})
    first = barca(project, "get", "doubled", "pipeline.py", "--pretty").expect(1)
    assert "failed after" in first.stdout
    assert first.stdout.splitlines()[0].endswith("s (20 keys: 18 ran, 1 failed, 1 blocked)")
    again = barca(project, "get", "doubled", "pipeline.py", "--pretty").expect(1)
    assert again.stdout.splitlines()[0].endswith(
        "s (20 keys: 18 cached, 1 failed, 1 blocked)"), again.stdout


def test_failed_run_in_json_mode_keeps_the_error_in_the_result_and_envelope(project: Path
                                                                           ) -> None:
    write(project, {"pipeline.py": FAILING})
    result = barca(project, "get", "report", "pipeline.py").expect(1)
    assert result.json["status"] == "failed" and result.json["error"] == "boom here"
    assert 'raise ValueError("boom here")' in result.envelope["traceback"]
    assert "Traceback" not in "\n".join(result.stderr.splitlines()[:-1])  # only in the envelope


def test_import_error_names_the_file_and_line_without_importlib_frames(project: Path) -> None:
    write(project, {"pipeline.py": NO_IMPORT, "other.py": OTHER})
    result = barca(project, "get", "--pretty").expect(1)
    assert "importing pipeline.py (line 3) failed" in result.stderr
    assert "importlib" not in result.stderr and "<frozen" not in result.stderr
    assert 'File "' in result.stderr and "pipeline.py\", line 3, in <module>" in result.stderr
    assert result.stderr.count("name 'pandas' is not defined") == 1
    assert "top-level code of pipeline.py" in result.stderr
    envelope = barca(project, "get", "orders", "pipeline.py").expect(1).envelope
    assert "importing pipeline.py (line 3) failed" in envelope["error"]
    assert "importlib" not in envelope["traceback"]
    assert envelope["traceback"].startswith("Traceback")


def test_doctor_reports_a_name_the_top_level_code_never_defines(project: Path) -> None:
    write(project, {"pipeline.py": NO_IMPORT, "other.py": OTHER})
    result = barca(project, "doctor").expect(3)
    checks = {c["name"]: c for c in result.json["checks"]}
    top = checks["top_level"]
    assert not top["ok"] and result.json["ok"] is False
    assert top["data"]["undefined"] == [{"file": "pipeline.py", "line": 3, "name": "pandas"}]
    assert "pipeline.py line 3" in top["detail"] and "import pandas" in top["fix"]
    write(project, {"pipeline.py": "import os\n" + NO_IMPORT.replace("pandas.DataFrame",
                                                                     "os.getcwd")})
    fixed = barca(project, "doctor").expect(0)
    assert {c["name"]: c for c in fixed.json["checks"]}["top_level"]["ok"]
