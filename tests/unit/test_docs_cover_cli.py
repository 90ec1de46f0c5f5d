"""The manual covers the CLI: every command has a section in `barca docs contract` naming each
of its flags and arguments, and every command appears in the overview.

The command tree is read from `barca.cli.app.COMMANDS` and each command's click parameters,
so adding a command or a flag without documenting it fails here.
"""

from __future__ import annotations

import importlib
import re

import click
import pytest

from barca.cli.docs import summary, topics
from barca.cli.app import COMMANDS, cli

# Positional parameters whose click name is not what users see (`args` = TARGET and FILES).
_SHOWN_AS = {"args": None}


def _commands() -> dict[str, click.Command]:
    return {name: getattr(importlib.import_module(module), attribute)
            for name, (module, attribute, _) in COMMANDS.items()}


def _sections() -> dict[str, str]:
    """`### \\`barca NAME ...\\`` heading -> the text until the next such heading."""
    text = topics()["contract"]
    parts = re.split(r"^### `barca (\w+)[^`]*`", text, flags=re.MULTILINE)
    headings = re.findall(r"^### `barca [^`]*`", text, flags=re.MULTILINE)
    out = {}
    for i in range(1, len(parts), 2):
        out[parts[i]] = headings[i // 2] + parts[i + 1]
    return out


def _mentions(text: str, flag: str) -> bool:
    return re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", text) is not None


def test_every_command_has_a_section_in_the_contract() -> None:
    missing = sorted(set(_commands()) - set(_sections()))
    assert not missing, f"commands without a `### \\`barca NAME\\`` section: {missing}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_flag_of_a_command_is_in_its_section(name: str) -> None:
    section = _sections().get(name, "")
    command = _commands()[name]
    missing = [flag for param in command.params if isinstance(param, click.Option)
               for flag in (*param.opts, *param.secondary_opts) if not _mentions(section, flag)]
    assert not missing, f"barca {name}: flags not documented in its contract section: {missing}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_positional_argument_is_in_the_section_heading(name: str) -> None:
    heading = _sections().get(name, "").splitlines()[0] if name in _sections() else ""
    command = _commands()[name]
    missing = []
    for param in command.params:
        if not isinstance(param, click.Argument):
            continue
        shown = _SHOWN_AS.get(param.name, param.name.upper())
        if shown is not None and shown not in heading:
            missing.append(shown)
    assert not missing, f"barca {name}: arguments missing from `{heading}`: {missing}"


def test_top_level_flags_are_documented() -> None:
    contract = topics()["contract"]
    flags = [flag for param in cli.params if isinstance(param, click.Option)
             for flag in param.opts]
    assert flags and all(_mentions(contract, flag) for flag in flags), flags


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_is_in_the_overview(name: str) -> None:
    assert f"`barca {name}" in topics()["overview"], name


def test_required_topics_exist_with_a_title_and_a_summary() -> None:
    pages = topics()
    for name in ("overview", "assets", "tasks", "cache", "types", "status", "sql", "agents",
                 "contract", "history", "maintenance"):
        assert name in pages, name
    for name, text in pages.items():
        assert text.startswith("# "), f"{name}.md must start with a `# Title` line"
        assert summary(text) and not summary(text).startswith("```"), name


def test_every_topic_is_listed_in_the_overview() -> None:
    overview = topics()["overview"]
    for name in topics():
        if name != "overview":
            assert f"- `{name}`" in overview, f"topic {name} is not listed in overview.md"


def test_exit_codes_and_envelope_keys_are_in_the_contract() -> None:
    contract = topics()["contract"]
    for code, kind in ((1, "step_failed"), (2, "usage"), (3, "infra"), (130, "cancelled")):
        assert re.search(rf"^\| {code} \| `{kind}` \|", contract, re.MULTILINE), (code, kind)
    assert "{error, code, kind, remediation}" in contract
