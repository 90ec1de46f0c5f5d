"""How much of what a step prints is kept in the metadata database.

Every line a step prints is stored (`barca logs`, `barca history RUN_ID`, the server's run
pages read it back), so one step that prints a 20 MB line, or a million progress lines, would
grow the database by that much on every run and slow every reader of its logs. A step keeps
its first MAX_LINES lines, each cut to MAX_LINE_CHARS characters; what is cut or dropped is
said in the log itself, by a `[barca]` line where it happened and a count when the run ends.
The terminal still shows every line as it is printed: only what is stored is capped.
"""

from __future__ import annotations

MAX_LINE_CHARS = 16_384
MAX_LINES = 10_000


class LogCap:
    """Per step: the lines kept so far, and what was dropped after the limit."""

    def __init__(self, max_lines: int = MAX_LINES, max_chars: int = MAX_LINE_CHARS) -> None:
        self.max_lines, self.max_chars = max_lines, max_chars
        self.kept: dict[str, int] = {}
        self.dropped: dict[str, list[int]] = {}  # step id -> [lines, characters]

    def admit(self, step_id: str, text: str) -> str | None:
        """The text to store for this line (cut when too long), a marker for the first line
        over the step's limit, or None (dropped, and counted)."""
        kept = self.kept.get(step_id, 0)
        if kept > self.max_lines:
            counts = self.dropped[step_id]
            counts[0] += 1
            counts[1] += len(text)
            return None
        self.kept[step_id] = kept + 1
        if kept == self.max_lines:
            self.dropped[step_id] = [1, len(text)]
            return (f"[barca] log limit: this step printed more than {self.max_lines:,} "
                    "lines; the later ones are not kept")
        if len(text) > self.max_chars:
            return (f"{text[:self.max_chars]} [barca] line cut: {len(text) - self.max_chars:,} "
                    f"more characters not kept (a stored line keeps {self.max_chars:,})")
        return text

    def summaries(self) -> list[tuple[str, str]]:
        """(step id, text) of a closing line for each step that had lines dropped."""
        return [(step_id, f"[barca] log limit: {lines:,} more lines ({chars:,} characters) of "
                 "this step's output were not kept")
                for step_id, (lines, chars) in self.dropped.items()]
