"""The retry rule of a step that raised, applied where the step runs (a worker retries its
own step after the backoff, without a trip to the coordinator)."""

from __future__ import annotations


def attempt_failed(attempt: int, retries: int, backoff: float, retryable: bool, now: float
                   ) -> tuple[str, float | None]:
    """A step's attempt `attempt` (from 1) raised: ("retry", when the next attempt starts) while
    attempts remain and the error is one to retry, else ("failed", None). The wait grows with
    each attempt (`backoff` seconds times the attempts made)."""
    if retryable and attempt < retries:
        return "retry", now + backoff * attempt
    return "failed", None
