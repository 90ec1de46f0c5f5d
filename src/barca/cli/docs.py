"""`barca docs [TOPIC]`: the manual, shipped inside the package so it matches this version.

Each topic is one markdown file in `barca/docs/`; its name is the file name and its summary
the first paragraph line after the title. Markdown is printed as is, whatever stdout is;
`--json` wraps it for programs.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import click

from barca.cli.output import emit, emit_json
from barca.errors import UsageError

HELP = """Print the manual: without TOPIC, the list of topics; with it, that page.

\b
Examples:
  barca docs
  barca docs history
  barca docs contract --json
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
def docs_command(topic, all_topics, json_flag) -> None:
    pages = topics()
    if topic is not None and all_topics:
        raise UsageError("--all prints every topic and cannot be combined with a TOPIC",
                         f"run `barca docs {topic}` or `barca docs --all`")
    if topic is not None:
        if topic not in pages:
            raise UsageError(f"unknown docs topic '{topic}'",
                             f"topics: {', '.join(pages)}")
        _print_topic(topic, pages[topic], json_flag)
        return
    if all_topics:
        _print_all(pages, json_flag)
        return
    _print_index(pages, json_flag)


def _entry(name: str, text: str, content: bool) -> dict[str, Any]:
    out = {"name": name, "summary": summary(text)}
    if content:
        out["content"] = text
    return out


def _print_topic(name: str, text: str, json_flag: bool) -> None:
    if json_flag:
        emit_json(_entry(name, text, True), indent=True)
    else:
        emit(text)


def _print_all(pages: dict[str, str], json_flag: bool) -> None:
    if json_flag:
        emit_json({"topics": [_entry(n, t, True) for n, t in pages.items()]}, indent=True)
    else:
        emit("\n\n".join(text.rstrip() for text in pages.values()))


def _print_index(pages: dict[str, str], json_flag: bool) -> None:
    if json_flag:
        emit_json({"topics": [_entry(n, t, False) for n, t in pages.items()]}, indent=True)
        return
    width = max(len(n) for n in pages)
    lines = ["barca docs TOPIC prints one of these pages:", ""]
    lines += [f"  {name.ljust(width)}  {summary(text)}" for name, text in pages.items()]
    emit("\n".join(lines))
