"""The web UI's pure modules (formatting, node looks, a live run's state, a job's cron in
words and its fires, a recompute's key selection: format.js, look.js, live.js, cron.js,
selection.js) under `node --test` (Debian's `nodejs`), so that README's `pytest` runs them too.
The tests are tests/browser/ui/*.test.mjs; `node --test tests/browser/ui/*.test.mjs` runs
them alone. Without node the test skips, unless BARCA_REQUIRE_BROWSER=1 (then it fails)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "ui"


def test_ui_modules_pass_node_test():
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        if os.environ.get("BARCA_REQUIRE_BROWSER") == "1":
            pytest.fail("BARCA_REQUIRE_BROWSER=1 but node is not installed (apt-get install nodejs)")
        pytest.skip("node is not installed (apt-get install nodejs)")
    files = sorted(str(p) for p in HERE.glob("*.test.mjs"))
    assert files, f"no *.test.mjs under {HERE}"
    done = subprocess.run([node, "--test", *files], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout, done.stdout[-2000:]
