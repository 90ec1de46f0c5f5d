"""Settings read from BARCA_* environment variables, each checked the same way wherever it is
read: a bad value is a `UsageError` (exit 2) naming the variable, its value and the fix,
raised before anything runs.
"""

from __future__ import annotations

import os

from barca.errors import UsageError


def seconds(name: str, default: float, fix: str) -> float:
    """The variable `name` as a finite number of seconds, 0 or more; `default` when it is unset
    or empty. `fix` says what to set it to."""
    text = os.environ.get(name)
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):  # nan fails both; math is not imported for it
        raise UsageError(f"{name}={text!r} is not a number of seconds", fix)
    return value
