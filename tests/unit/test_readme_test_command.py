"""README's test command is CI's, and it prints pytest's summary line ("N passed").

pyproject's `addopts` is added to every pytest command: a `-q` there and README's own `-q`
make `-qq`, which hides the summary line with the test count. The command is run for real
(with pyproject's configuration) on a one-test file of its own, in one process."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _pytest_args(text: str) -> list[str]:
    """The arguments after `python -m pytest` of the first such command in `text`."""
    found = re.search(r"\.venv/bin/python -m pytest([^\n&|;`]*)", text)
    assert found, "no `.venv/bin/python -m pytest` command found"
    return shlex.split(found.group(1))


def test_readme_runs_the_tests_as_ci_does() -> None:
    readme = (REPO / "README.md").read_text()
    setup = readme.split("## A pipeline")[0]
    assert _pytest_args(setup) == _pytest_args((REPO / ".ci" / "run").read_text())


def test_readme_test_command_prints_the_summary_line(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    args = _pytest_args((REPO / "README.md").read_text().split("## A pipeline")[0])
    proc = subprocess.run([sys.executable, "-m", "pytest", *args, "-n", "0", "-p",
                           "no:cacheprovider", "-c", str(REPO / "pyproject.toml"),
                           "--rootdir", str(tmp_path), str(tmp_path / "test_one.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^1 passed in ", proc.stdout, re.M), proc.stdout
