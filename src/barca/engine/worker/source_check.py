"""A worker runs the pipeline code the run was planned with, or fails the step.

The coordinator hashes the run from the source it discovered; a worker imports the file on its
own disk, perhaps later (a file rewritten mid-run) or on another machine (a stale copy). Each
step names the digest of the file's bytes the plan saw; the step runner compares it with the
bytes it imported, and a mismatch fails the step, never retried, so that new run hashes are
never recorded over old code. Only the pipeline file itself is compared: the helpers it
imports are covered by the run hash, not by this check.
"""

from __future__ import annotations

from pathlib import Path

from barca.discover.lookup import file_digest


class SourceChanged(Exception):
    """The pipeline file a worker imported is not the one the run was planned with."""

    def __init__(self, file: str, planned: str, imported: str) -> None:
        super().__init__(
            f"{file} is not the source this run was planned with (planned from bytes "
            f"{planned[:12]}, this worker imported {imported[:12]}): it changed after barca "
            "read it, or this worker's copy of the project differs. Nothing was recorded for "
            "this step; run the command again to plan from the file as it is now")
        self.file = file


def digest_of(path: Path) -> str:
    """The digest of a file's bytes, as discovery takes it (discover.lookup.file_digest)."""
    return file_digest(path.read_bytes())


def check(file: str, planned: str, imported: str) -> None:
    """Raise SourceChanged unless the imported bytes are those planned ("" checks nothing)."""
    if planned and planned != imported:
        raise SourceChanged(file, planned, imported)
