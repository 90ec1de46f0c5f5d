"""Cache and planning rules at the driver level: a pipeline written in a temporary project,
run by the driver (`engine.driver.run`, the one way in of `barca get|run`) in this process
with the in-process executor (the real step runner), against the project's real SQLite file
and artifact store. What comes back is the JSON `barca get|run` prints, built by the same
report view (`views.run_report`), so a rule reads here as it does end to end; the end-to-end
files under tests/e2e/ keep a subset of each rule family against real worker processes.

Use the `engine` fixture (import it with `from engine_runs import engine`): `engine.get(
"d", "pipeline.py", refresh="b")` is `barca get d pipeline.py --refresh b`. A bad request
raises barca's UsageError as the driver does (the CLI turns it into exit 2).

This is a module, not tests/engine/conftest.py: pytest imports every conftest.py as the
module `conftest`, and a second one would hide tests/conftest.py from the test files that
`from conftest import ...` after it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pytest

from barca.engine import driver
from barca.engine.events import Reporter
from barca.engine.inprocess import InProcessExecutor
from barca.engine.result import RunResult
from barca.views.run_report import DryRunReport, RunReport
from barca.views.warning_text import warning_text
from conftest import _ISOLATED, _forget_project_modules


class _Heard(Reporter):
    """The warnings a run reports, worded as the CLI's `[barca] warning:` lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def warning(self, code: str, evidence: Mapping[str, Any]) -> None:
        self.lines.append(f"[barca] warning: {warning_text(code, evidence)}")


@dataclass
class Ran:
    """One run: the driver's result, the JSON the CLI prints for it, and what it says beside
    it (warnings and notes, the CLI's stderr lines)."""

    result: RunResult
    json: dict[str, Any]
    lines: list[str] = field(default_factory=list)
    executors: int = 0  # executors the run started (a fully cached run starts none)

    @property
    def code(self) -> int:
        """The exit code the CLI gives this run: 1 when a step failed."""
        return 1 if self.result.status == "failed" else 0

    def expect(self, code: int) -> "Ran":
        assert self.code == code, (f"status {self.result.status}, expected exit {code}: "
                                   f"{[o.error_message for o in self.result.failed]}")
        return self

    @property
    def stderr(self) -> str:
        return "\n".join(self.lines)

    @property
    def steps(self) -> dict[str, dict[str, Any]]:
        """steps[] keyed by node name (the part of the id after ':')."""
        return {s["id"].split(":", 1)[1]: s for s in self.json["steps"]}

    def statuses(self) -> dict[str, str]:
        """name -> status (real runs) or action (dry runs)."""
        return {name: s.get("status", s.get("action")) for name, s in self.steps.items()}


class Engine:
    """Runs in one project directory, which is the current directory while a run goes (as a
    worker's is): pipelines read and write files relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def get(self, target: str | None, *files: str, **options: Any) -> Ran:
        return self.__call__("get", target, *files, **options)

    def run(self, target: str | None, *files: str, **options: Any) -> Ran:
        return self.__call__("run", target, *files, **options)

    def __call__(self, command: str, target: str | None, *files: str,
                 environ: Mapping[str, str | None] | None = None, **options: Any) -> Ran:
        """`options` are `driver.run`'s (refresh, refresh_all, cascade, dry_run, partition,
        batch, env); `environ`: variables set (None: unset) for this run only, as
        `barca(..., env=...)` gives a command."""
        started: list[InProcessExecutor] = []

        def new_executor() -> InProcessExecutor:
            started.append(InProcessExecutor(self.root))
            return started[-1]

        heard = _Heard()
        saved, modules, path = dict(os.environ), set(sys.modules), list(sys.path)
        cwd = os.getcwd()
        os.chdir(self.root)
        for name, value in (environ or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        try:
            result = driver.run(command, target, list(files), cwd=self.root,
                                new_executor=new_executor, reporter=heard, **options)
            # values are read here, before the project's modules are forgotten: a pickled
            # value may import the module that defines its class
            report: DryRunReport | RunReport = DryRunReport(result, command, target) \
                if result.status == "dry_run" else RunReport(result, command, target)
            body = report.to_json()
        finally:
            os.chdir(cwd)
            os.environ.clear()
            os.environ.update(saved)
            _forget_project_modules(modules, path)
        notes = report.notes(list(files), options.get("env"))
        return Ran(result, body, heard.lines + notes, len(started))


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    """An empty project (a barca.toml) in the test's directory, without the developer's
    BARCA_* settings and without bytecode files. Another project: `Engine(path)`."""
    (tmp_path / "barca.toml").write_text("")
    # workers compile project code from source (engine.worker.project_code); here a module
    # edited within the second it was cached, at the same size, would load its old bytecode
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    for name in _ISOLATED:
        monkeypatch.delenv(name, raising=False)
    return Engine(tmp_path)
