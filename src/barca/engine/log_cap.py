"""How much of what a step prints is kept in the metadata database.

Every line a step prints is stored (`barca logs`, `barca history RUN_ID`, the server's run
pages read it back), so one step that prints a 20 MB line, or a million progress lines, would
grow the database by that much on every run and slow every reader of its logs. A step keeps
its first MAX_LINES lines, each cut to MAX_LINE_CHARS characters; what is cut or dropped is
said in the log itself, by a `[barca]` line where it happened and a count when the run ends.
The terminal still shows every line as it is printed: only what is stored is capped.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_LINE_CHARS = 16_384
MAX_LINES = 10_000


@dataclass(frozen=True, slots=True)
class LineCut:
    """A line stored cut: its first `kept` characters (`text`), `cut` more not stored."""

    text: str
    cut: int
    kept: int


@dataclass(frozen=True, slots=True)
class LogLimit:
    """Stored instead of a step's first line over its limit of `max_lines` lines."""

    max_lines: int


@dataclass(frozen=True, slots=True)
class LogDropped:
    """Stored when the run ends: how much of a step's output was not (`lines`, `chars`)."""

    lines: int
    chars: int


LogMark = LineCut | LogLimit | LogDropped  # said in words by barca.views.warning_text


class LogCap:
    """Per step: the lines kept so far, and what was dropped after the limit."""

    def __init__(self, max_lines: int = MAX_LINES, max_chars: int = MAX_LINE_CHARS) -> None:
        self.max_lines, self.max_chars = max_lines, max_chars
        self.kept: dict[str, int] = {}
        self.dropped: dict[str, list[int]] = {}  # step id -> [lines, characters]

    def admit(self, step_id: str, text: str) -> str | LineCut | LogLimit | None:
        """What to store for this line: the text, the text cut when too long, a marker for
        the first line over the step's limit, or None (dropped, and counted)."""
        kept = self.kept.get(step_id, 0)
        if kept > self.max_lines:
            counts = self.dropped[step_id]
            counts[0] += 1
            counts[1] += len(text)
            return None
        self.kept[step_id] = kept + 1
        if kept == self.max_lines:
            self.dropped[step_id] = [1, len(text)]
            return LogLimit(self.max_lines)
        if len(text) > self.max_chars:
            return LineCut(text[:self.max_chars], len(text) - self.max_chars, self.max_chars)
        return text

    def summaries(self) -> list[tuple[str, LogDropped]]:
        """(step id, what was dropped) for each step that had lines dropped: a closing line."""
        return [(step_id, LogDropped(lines, chars))
                for step_id, (lines, chars) in self.dropped.items()]
