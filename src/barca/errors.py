"""barca's one error tree; the exit code lives on the class.

    BarcaError                 any failure barca reports (exit 3 unless a subclass says otherwise)
    ├── UsageError       (2)   the user's input is wrong: flags, targets, pipeline definitions
    ├── StepFailed       (1)   a user step raised; the run is recorded as failed
    ├── InfraError       (3)   barca or its environment failed: metadata DB, workers, disk
    └── Cancelled      (130)   Ctrl-C or SIGTERM during a run

Every error carries a `remediation` naming the fix where one exists. The CLI renders these
(human prose or the JSON envelope); the Python API raises them unchanged.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported for it: the `barca` launcher imports this
if TYPE_CHECKING:
    from typing import Any, ClassVar


class BarcaError(Exception):
    """Base of every error barca raises on purpose."""

    exit_code: ClassVar[int] = 3
    kind: ClassVar[str] = "infra"

    def __init__(self, message: str, remediation: str | None = None, **context: Any) -> None:
        super().__init__(message)
        self.message = message
        self.remediation = remediation
        self.context = context

    @property
    def code(self) -> int:
        return self.exit_code

    def envelope(self) -> dict[str, Any]:
        """The JSON error object printed as the last stderr line in JSON mode."""
        out: dict[str, Any] = {
            "error": self.message,
            "code": self.exit_code,
            "kind": self.kind,
            "remediation": self.remediation,
        }
        out.update(self.context)
        return out

    def human_lines(self) -> list[str]:
        """The prose a terminal shows: the error, then the fix on the last line."""
        return [f"error: {self.message}", *([f"  {self.remediation}"] if self.remediation else [])]


class UsageError(BarcaError):
    """Bad flags, unknown targets, or a pipeline that cannot be built."""

    exit_code = 2
    kind = "usage"


class StepFailed(BarcaError):
    """A user step raised; `node`, `traceback` and `artifact_dir` say where."""

    exit_code = 1
    kind = "step_failed"

    def __init__(self, message: str, remediation: str | None = None, *, result: Any = None,
                 headline: str | None = None, **context: Any) -> None:
        super().__init__(message, remediation, **context)
        self.result = result
        self.headline = headline  # the human line above the traceback

    @property
    def node(self) -> str | None:
        return self.context.get("node")

    @property
    def traceback(self) -> str | None:
        return self.context.get("traceback")

    def __str__(self) -> str:
        """The message, then the step's traceback: what a script that lets the error escape
        prints, so the user's frames are there without a look at `.traceback`."""
        trace = (self.traceback or "").rstrip()
        return f"{self.message}\n{trace}" if trace else self.message

    def human_lines(self) -> list[str]:
        """The traceback's last line already states the error: print it once, there."""
        if not self.traceback or not self.node:
            return super().human_lines()
        trace = [f"  {line}" for line in self.traceback.rstrip().splitlines()]
        return [f"error: {self.headline or f'step {self.node!r} failed'}:", *trace,
                *([f"  {self.remediation}"] if self.remediation else [])]


class InfraError(BarcaError):
    """barca itself or the machine failed (database, worker processes, I/O)."""

    exit_code = 3
    kind = "infra"


class Cancelled(BarcaError):
    """The run was interrupted by Ctrl-C or SIGTERM."""

    exit_code = 130
    kind = "cancelled"
