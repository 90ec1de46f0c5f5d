"""`barca docs [TOPIC]`: the manual, shipped inside the package so it matches this version.

Each topic is one markdown file in `barca/docs/`; its name is the file name and its summary
the first paragraph line after the title. In a terminal a page is rendered for reading
(headings, tables, code blocks: rich's Markdown); piped or redirected it is the Markdown as is,
for grep, a file or a program; `--json` wraps it for programs.
"""

from __future__ import annotations

import sys
from importlib import resources
from typing import Any

import click

from barca.cli.output import emit, emit_json, parse_fields
from barca.errors import UsageError

FIELDS = ["name", "summary", "content"]

HELP = """Print the manual: without TOPIC, the list of topics; with it, that page.

\b
In a terminal a page is rendered for reading; piped or redirected it is its Markdown.

\b
Examples:
  barca docs
  barca docs history
  barca docs contract --json
  barca docs --fields name
"""


def topics() -> dict[str, str]:
    """Topic name -> markdown text, in name order (overview first)."""
    folder = resources.files("barca") / "docs"
    found = {entry.name[:-3]: entry.read_text(encoding="utf-8")
             for entry in folder.iterdir() if entry.name.endswith(".md")}
    order = sorted(found, key=lambda n: (n != "overview", n))
    return {name: found[name] for name in order}


def summary(text: str) -> str:
    """The first paragraph line after the title.

    >>> summary("# Title\\n\\nWhat it is.\\nMore.\\n")
    'What it is.'
    """
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            return line
    return ""


@click.command("docs", help=HELP)
@click.argument("topic", required=False)
@click.option("--all", "all_topics", is_flag=True, help="Every topic, one after the other.")
@click.option("--json", "json_flag", is_flag=True, help="JSON: {topics: [{name, summary}]} "
              "or {name, summary, content}.")
@click.option("--fields", metavar="A,B", help="Keep only these keys of each topic (implies "
              "JSON): " + ", ".join(FIELDS) + "; content is given when asked for, in the "
              "index too.")
def docs_command(topic, all_topics, json_flag, fields) -> None:
    chosen = parse_fields(fields, FIELDS)
    json_flag = json_flag or chosen is not None
    pages = topics()
    if topic is not None and all_topics:
        raise UsageError("--all prints every topic and cannot be combined with a TOPIC",
                         f"run `barca docs {topic}` or `barca docs --all`")
    if topic is not None:
        if topic not in pages:
            raise UsageError(f"unknown docs topic '{topic}'",
                             f"topics: {', '.join(pages)}")
        _print_topic(topic, pages[topic], json_flag, chosen)
        return
    if all_topics:
        _print_all(pages, json_flag, chosen)
        return
    _print_index(pages, json_flag, chosen)


def _entry(name: str, text: str, content: bool, fields: list[str] | None) -> dict[str, Any]:
    """A topic as JSON: `fields` (all when None) of name, summary and, with `content` or when
    `fields` asks for it, content."""
    out = {"name": name, "summary": summary(text)}
    if content or fields is not None and "content" in fields:
        out["content"] = text
    return out if fields is None else {k: out[k] for k in fields if k in out}


def _print_topic(name: str, text: str, json_flag: bool, fields: list[str] | None) -> None:
    if json_flag:
        emit_json(_entry(name, text, True, fields), indent=True)
    else:
        _show(text)


def _print_all(pages: dict[str, str], json_flag: bool, fields: list[str] | None) -> None:
    if json_flag:
        emit_json({"topics": [_entry(n, t, True, fields) for n, t in pages.items()]},
                  indent=True)
    else:
        _show("\n\n".join(text.rstrip() for text in pages.values()))


def _show(markdown: str) -> None:
    """A page rendered for a terminal, or its Markdown as is when stdout is not one."""
    if not sys.stdout.isatty():
        emit(markdown)
        return
    from rich.console import Console
    from rich.markdown import Markdown

    Console(file=sys.stdout).print(Markdown(markdown, code_theme="ansi_dark"))


def _print_index(pages: dict[str, str], json_flag: bool, fields: list[str] | None) -> None:
    if json_flag:
        emit_json({"topics": [_entry(n, t, False, fields) for n, t in pages.items()]},
                  indent=True)
        return
    width = max(len(n) for n in pages)
    lines = ["barca docs TOPIC prints one of these pages:", ""]
    lines += [f"  {name.ljust(width)}  {summary(text)}" for name, text in pages.items()]
    emit("\n".join(lines))
