"""Answers of fully cached `barca get`s, kept to be given again (engine.cached_get): the file
that holds one. Kept to os and marshal: the `barca` launcher reads it before anything heavier
(what it checks in the metadata database is store.answer_marks, imported only then).

An answer file is marshal data (this interpreter's own format: another interpreter's key
differs, and a file it cannot read is no answer).
"""

from __future__ import annotations

import marshal
import os


def answer_file(state_dir: str, digest: str) -> str:
    return os.path.join(state_dir, "answers", digest + ".answer")


def load(path: str) -> dict | None:
    try:
        with open(path, "rb") as fh:
            found = marshal.load(fh)
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return found if isinstance(found, dict) else None


def save(path: str, answer: dict) -> None:
    """Written whole (a temporary file renamed over it): a reader finds the old answer or the
    new one. An answer that cannot be written is only a slower next `get`."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            marshal.dump(answer, fh)
        os.replace(tmp, path)
    except (OSError, ValueError):
        try:
            os.unlink(tmp)
        except OSError:
            pass
