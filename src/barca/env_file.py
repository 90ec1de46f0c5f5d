"""The project's `.env` file: where a variable declared in `env=` gets its value when the
process environment does not set it (as the published barca 0.33 does).

Only the file at the project root counts (`.env.local`, `.env.production`, ... are other
tools' files and never read), and only for declared variables: the process environment
always wins, and barca never sets the file's values for a step. A step that wants them reads
the file itself (python-dotenv's `load_dotenv()`); barca's part is that a declared value
taken from the file enters the run hash exactly as the same value set in the environment.

The syntax is the common dotenv one: `KEY=VALUE` lines, an optional `export ` before the key,
`#` comments (whole lines, or after a space in an unquoted value), single quotes (taken
literally), double quotes (with `\\n`, `\\t`, `\\"`, `\\\\` escapes; may span lines), and
`${NAME}` / `${NAME:-default}` in unquoted and double-quoted values (NAME from the process
environment first, then from the lines above). A line that is none of these is exit 2 naming
it: a declared value read wrongly would be hashed wrongly.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, Mapping

from barca.errors import UsageError

ENV_FILE = ".env"

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_ASSIGN = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s*")
_EXPANSION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "$": "$"}


def declared_values(root: Path, names: Iterable[str],
                    environ: Mapping[str, str] = os.environ) -> dict[str, str | None]:
    """Each declared variable's value, as a run hash takes it: the process environment's,
    else the project's `.env`'s, else None (unset, which differs from empty). The file is
    read only when a declared variable is missing from the environment."""
    values = {name: environ.get(name) for name in sorted(set(names))}
    if all(v is not None for v in values.values()):
        return values
    from_file = read_env_file(root / ENV_FILE, environ)
    return {name: from_file.get(name) if value is None else value
            for name, value in values.items()}


def read_env_file(path: Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The assignments of a `.env` file ({} when there is none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {exc}",
                         f"make {ENV_FILE} a readable UTF-8 text file, or remove it") from None
    return parse(text, environ, str(path))


def parse(text: str, environ: Mapping[str, str] = os.environ,
          where: str = ENV_FILE) -> dict[str, str]:
    """`KEY=VALUE` assignments of dotenv text, later lines winning.

    >>> parse("export A=1 # one\\nB='${A}'\\nC=\\"x ${A} ${D:-d}\\"\\n", {})
    {'A': '1', 'B': '${A}', 'C': 'x 1 d'}
    """
    out: dict[str, str] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index]
        index += 1
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        match = _ASSIGN.match(line)
        if match is None:
            if _KEY.fullmatch(stripped):
                continue  # a bare name: no value, as other dotenv readers take it
            raise _bad(where, number, line, "is not KEY=VALUE")
        key, rest = match.group(1), line[match.end():]
        quote = rest[:1]
        if quote in ("'", '"'):
            body, index = _quoted(rest[1:], quote, lines, index, where, number)
            out[key] = body if quote == "'" else _expand(_unescape(body), environ, out)
        else:
            value = re.split(r"\s#", rest, maxsplit=1)[0].strip()
            out[key] = _expand(value, environ, out)
    return out


def _quoted(rest: str, quote: str, lines: list[str], index: int, where: str,
            number: int) -> tuple[str, int]:
    """The text up to the closing quote (an escaped `\\"` does not close a double-quoted
    value), continuing on the next lines if need be, and the index of the line after it."""
    text = rest
    while True:
        end = _closing(text, quote)
        if end is not None:
            tail = text[end + 1:].strip()
            if tail and not tail.startswith("#"):
                raise _bad(where, number, lines[number - 1], "has text after its closing quote")
            return text[:end], index
        if index >= len(lines):
            raise _bad(where, number, lines[number - 1], f"opens a {quote} quote it never "
                       "closes")
        text += "\n" + lines[index]
        index += 1


def _closing(text: str, quote: str) -> int | None:
    escaped = False
    for position, char in enumerate(text):
        if escaped:
            escaped = False
        elif char == "\\" and quote == '"':
            escaped = True
        elif char == quote:
            return position
    return None


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), text)


def _expand(value: str, environ: Mapping[str, str], earlier: Mapping[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = environ.get(name, earlier.get(name))
        if default is not None and not found:
            return default
        return found or ""

    return _EXPANSION.sub(one, value)


def _bad(where: str, number: int, line: str, why: str) -> UsageError:
    """The error names the line and its key, never its value (it may be a secret)."""
    match = _ASSIGN.match(line)
    what = f"the line of {match.group(1)}" if match else "the line"
    return UsageError(f"{where}, line {number}: {what} {why}",
                      "write each variable as KEY=VALUE (quote a value with spaces or #), or "
                      "set the variable in the environment instead")
