"""Text from outside barca made safe to print on a terminal or in a line-oriented log.

Partition keys come from sensors, that is from outside data, and error messages, `Failed`
reasons and a step's output from user code. Printed as they are, an escape sequence in one
recolours or rewrites the terminal, and a newline forges a line of its own (`[barca] run
failed` in `--agent` output, a log a script reads line by line). Every renderer of lines for
people or logs passes such text through `printable`; JSON output keeps the text exact (its
encoder escapes what JSON must). `note` writes such a line on stderr: the CLI's notes, a
server's log.
"""

from __future__ import annotations

import re
import sys
from typing import Iterable

# C0, DEL, C1, and the Unicode line and paragraph separators (some readers break lines there)
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(found: re.Match) -> str:
    char = found.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str) -> str:
    """`text` as one line with every control character written as Python's repr writes it
    (`\\x1b`, `\\n`, `\\u2028`); a backslash already in the text is left as it is."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def printable_lines(lines: Iterable[str]) -> str:
    """Lines, each made printable, joined by newlines: a block whose line breaks are barca's
    own."""
    return "\n".join(map(printable, lines))



def note(text: str) -> None:
    """One line on stderr, its control characters escaped (barca.printable): a key or a
    message from user code in it cannot end the line or recolour the terminal."""
    note_exact(printable(text))



def note_exact(text: str) -> None:
    """A line on stderr as it is: JSON (an error envelope, an `--events` line)."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except BrokenPipeError:
        pass
