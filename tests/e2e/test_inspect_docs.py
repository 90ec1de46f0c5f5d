"""`barca docs`: topics, summaries, errors; and every runnable example in the manual runs.

Runnable examples: in a topic, each ```` ```python file=NAME ```` block is written to NAME in a
fresh project, then every `$ ` line of each ```` ```console run ```` block runs in order through
bash, with the installed `barca` first on PATH. A line ending in `# exit N` must exit N, any
other 0. The placeholder `RUN_ID` stands for the newest run's id at that point.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from barca.cli.docs import summary, topics
from conftest import barca, barca_env

DOCS = Path(__file__).resolve().parents[2] / "src" / "barca" / "docs"
_BLOCK = re.compile(r"^```([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _examples(text: str) -> tuple[dict[str, str], list[tuple[str, int]]]:
    files: dict[str, str] = {}
    commands: list[tuple[str, int]] = []
    for info, body in _BLOCK.findall(text):
        words = info.split()
        names = [w[5:] for w in words if w.startswith("file=")]
        if words[:1] == ["python"] and names:
            files[names[0]] = body
        elif words == ["console", "run"]:
            for line in body.splitlines():
                if line.startswith("$ "):
                    expected = re.search(r"#\s*exit (\d+)\s*$", line)
                    commands.append((line[2:], int(expected.group(1)) if expected else 0))
    return files, commands


RUNNABLE = sorted(name for name, text in topics().items() if _examples(text)[1])


def test_most_topics_carry_runnable_examples() -> None:
    assert len(RUNNABLE) >= 9, RUNNABLE
    assert {"overview", "history", "sql", "maintenance", "agents"} <= set(RUNNABLE)


@pytest.mark.parametrize("topic", RUNNABLE)
def test_every_runnable_example_runs(topic: str, tmp_path: Path) -> None:
    files, commands = _examples(topics()[topic])
    (tmp_path / "barca.toml").write_text("")
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    env = barca_env()
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    for command, expected in commands:
        if "RUN_ID" in command:
            newest = barca(tmp_path, "history", "--limit", "1").expect(0).json["runs"]
            assert newest, f"{topic}: `{command}` needs a run, but none was recorded yet"
            command = command.replace("RUN_ID", newest[0]["run_id"])
        proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == expected, (
            f"barca docs {topic}: `{command}` exited {proc.returncode}, expected {expected}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        assert "Traceback (most recent call last)" not in proc.stderr or expected == 1, (
            f"barca docs {topic}: `{command}` printed a traceback:\n{proc.stderr}")


def test_docs_without_topic_lists_every_topic_with_its_summary(tmp_path: Path) -> None:
    names = sorted(p.stem for p in DOCS.glob("*.md"))
    body = barca(tmp_path, "docs", "--json").expect(0).json
    assert sorted(t["name"] for t in body["topics"]) == names
    assert body["topics"][0]["name"] == "overview"
    sql = next(t for t in body["topics"] if t["name"] == "sql")
    assert sql["summary"] == summary((DOCS / "sql.md").read_text())
    text = barca(tmp_path, "docs").expect(0).stdout
    for name in names:
        assert re.search(rf"^  {re.escape(name)}\s+\S", text, re.MULTILINE), name


def test_docs_in_a_terminal_renders_the_page_and_piped_stays_markdown(tmp_path: Path) -> None:
    """Read by a person, a page is laid out (no `#`, no backticks or fences); piped, the same
    page is its Markdown, byte for byte (below)."""
    import pty

    from conftest import CLI, read_pty

    master, slave = pty.openpty()
    proc = subprocess.Popen([*CLI, "docs", "agents"], cwd=tmp_path, stdout=slave,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            env=barca_env({"COLUMNS": "100", "TERM": "xterm"}))
    os.close(slave)
    shown = read_pty(master).decode()  # read while it writes: a page outgrows a pty's buffer
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown)
    assert shown != plain  # styled for the terminal
    assert "For agents and scripts" in plain and "# For agents" not in plain
    assert "```" not in plain and "`barca list pipeline.py --json`" not in plain
    assert "barca list pipeline.py --json" in plain


def test_docs_topic_prints_the_page_as_markdown_when_piped(tmp_path: Path) -> None:
    out = barca(tmp_path, "docs", "history").expect(0).stdout
    assert out.rstrip("\n") == (DOCS / "history.md").read_text().rstrip("\n")
    one = barca(tmp_path, "docs", "contract", "--json").expect(0).json
    assert one["name"] == "contract" and one["content"] == (DOCS / "contract.md").read_text()
    assert one["summary"].startswith("Every command and flag")


def test_docs_all_prints_every_topic(tmp_path: Path) -> None:
    text = barca(tmp_path, "docs", "--all").expect(0).stdout
    assert text.count("\n# ") + text.startswith("# ") == len(list(DOCS.glob("*.md")))
    body = barca(tmp_path, "docs", "--all", "--json").expect(0).json
    assert all(t["content"] for t in body["topics"])
    assert barca(tmp_path, "docs", "sql", "--all").expect(2).envelope["kind"] == "usage"


def test_unknown_topic_is_exit_2_listing_the_topics(tmp_path: Path) -> None:
    bad = barca(tmp_path, "docs", "partitionz").expect(2)
    assert bad.envelope["error"] == "unknown docs topic 'partitionz'"
    assert bad.envelope["remediation"].startswith("topics: overview, ")
    assert "contract" in bad.envelope["remediation"]
    human = barca(tmp_path, "docs", "nope", "--json").expect(2)
    assert human.stdout == ""
