"""A `freshness=Manual` asset after a code edit, as the published 0.33: kept (and said so on
stderr) until it is refreshed; then its readers rerun, since they hash its run hash as well as
its bytes."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, edit, write

PIPELINE = """
from barca import Manual, asset

@asset(freshness=Manual)
def rates() -> dict:
    return {"EUR": 1.08}

@asset(inputs={"rates": rates})
def in_usd(rates: dict) -> float:
    return 100 * rates["EUR"]
"""

NOTE = ("[barca] note: rates is Manual and stale; barca get rates pipeline.py --refresh rates "
        "to recompute")


def test_a_code_edit_is_noted_and_reruns_readers_once_refreshed(project: Path) -> None:
    write(project, {"pipeline.py": PIPELINE})
    barca(project, "get", "in_usd", "pipeline.py", "--refresh", "rates").expect(0)
    kept = barca(project, "get", "in_usd", "pipeline.py").expect(0)
    assert kept.json["steps_executed"] == 0 and NOTE not in kept.stderr  # not stale: no note
    # the same value, written another way: new code, same bytes
    edit(project / "pipeline.py", '{"EUR": 1.08}', 'dict(EUR=1.08)')
    stale = barca(project, "get", "in_usd", "pipeline.py").expect(0)
    assert stale.json["steps_executed"] == 0
    assert stale.steps["rates"]["reason"] == "manual"
    assert NOTE in stale.stderr.splitlines()
    dry = barca(project, "get", "in_usd", "pipeline.py", "--dry-run").expect(0)
    assert NOTE in dry.stderr.splitlines()
    refreshed = barca(project, "get", "in_usd", "pipeline.py", "--refresh", "rates").expect(0)
    assert refreshed.statuses() == {"rates": "ran", "in_usd": "ran"}
    assert refreshed.steps["in_usd"]["changed"] == ["input pipeline.py:rates"]
    assert NOTE not in refreshed.stderr
    again = barca(project, "get", "in_usd", "pipeline.py").expect(0)
    assert again.json["steps_executed"] == 0 and NOTE not in again.stderr

    # a refresh of the same code that writes the same bytes reruns no reader
    same = barca(project, "get", "in_usd", "pipeline.py", "--refresh", "rates").expect(0)
    assert same.statuses() == {"rates": "ran", "in_usd": "cached"}
