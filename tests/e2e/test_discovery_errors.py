"""Discovery reads source with `ast` and never imports it to plan; bad definitions are exit 2.

Node ids are `path/file.py:function` relative to the project root (the nearest `barca.toml`,
else the working directory); inputs resolve across files and import styles; decorator aliases
count. Every bad definition names the file, the line and the fix. The refusals run in this
process (`barca_here`); the human-mode refusal runs the real command.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import barca, barca_env, barca_here, write



def test_node_ids_are_relative_to_the_barca_toml_root(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "jobs/daily/pipe.py": """
        from barca import asset

        @asset()
        def total() -> int:
            return 3
    """})
    from_subdir = barca(tmp_path / "jobs", "get", "total", "daily/pipe.py").expect(0)
    assert [s["id"] for s in from_subdir.json["steps"]] == ["jobs/daily/pipe.py:total"]
    assert (tmp_path / ".barca" / "artifacts" / "jobs/daily/pipe.py--total").is_dir()
    assert not (tmp_path / "jobs" / ".barca").exists()
    from_root = barca(tmp_path, "get", "total").expect(0)
    assert from_root.json["steps_executed"] == 0  # same id, same cache


def test_without_barca_toml_the_working_directory_is_the_root(tmp_path: Path) -> None:
    write(tmp_path, {"sub/p.py": """
        from barca import asset

        @asset()
        def one() -> int:
            return 1
    """})
    result = barca(tmp_path / "sub", "list").expect(0)
    assert [n["id"] for n in result.json["nodes"]] == ["p.py:one"]
    assert result.json["root"] == str((tmp_path / "sub").resolve())


def test_inputs_resolve_across_files_and_import_styles(project: Path) -> None:
    write(project, {
        "other.py": """
            from barca import asset

            @asset()
            def o() -> int:
                return 10
        """,
        "pkg/__init__.py": "",
        "pkg/base.py": """
            from barca import asset

            @asset()
            def root() -> int:
                return 1
        """,
        "pkg/rel.py": """
            from barca import asset
            from .base import root

            @asset(inputs={"r": root})
            def relative(r: int) -> int:
                return r + 1000
        """,
        "sub/deep/pipe.py": """
            import barca
            import other
            import other as oth
            from other import o as renamed
            from pkg.base import root
            from pkg import base
            import pkg.base
            from pkg.rel import relative

            @barca.asset(inputs={"a": other.o, "b": oth.o, "c": renamed, "d": root,
                                 "e": base.root, "f": pkg.base.root, "g": relative})
            def total(a: int, b: int, c: int, d: int, e: int, f: int, g: int) -> int:
                return a + b + c + d + e + f + g
        """,
    })
    listed = barca(project, "list").expect(0).json
    inputs = {n["id"]: n["inputs"] for n in listed["nodes"]}
    assert sorted(inputs["sub/deep/pipe.py:total"]) == [
        "other.py:o", "pkg/base.py:root", "pkg/rel.py:relative"]
    assert inputs["pkg/rel.py:relative"] == ["pkg/base.py:root"]
    result = barca(project, "get", "total").expect(0)
    assert result.json["final_output"] == 10 * 3 + 1 * 3 + 1001


def test_decorator_aliases_and_bare_decorators_are_nodes(project: Path) -> None:
    write(project, {"p.py": """
        import barca as b
        from barca import asset as make_asset, task as job
        from barca import asset

        @b.asset()
        def one() -> int:
            return 1

        @make_asset(inputs={"one": one})
        def two(one: int) -> int:
            return one + 1

        @asset
        def bare() -> int:
            return 5

        @job(inputs={"two": two})
        def ship(two: int) -> str:
            return f"shipped {two}"

        def plain() -> int:
            return 0
    """})
    listed = barca(project, "list", "p.py").expect(0).json
    kinds = {n["id"]: n["kind"] for n in listed["nodes"]}
    assert kinds == {"p.py:one": "asset", "p.py:two": "asset", "p.py:bare": "asset",
                     "p.py:ship": "task"}
    assert barca(project, "run", "ship", "p.py").expect(0).json["final_output"] == "shipped 2"


def test_explicit_name_is_the_node_id_and_the_target(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset

        @asset(name="daily_revenue")
        def compute() -> int:
            return 7
    """})
    result = barca(project, "get", "daily_revenue", "p.py").expect(0)
    assert [s["id"] for s in result.json["steps"]] == ["p.py:daily_revenue"]
    assert (project / ".barca" / "artifacts" / "p.py--daily_revenue").is_dir()
    assert barca(project, "get", "compute", "p.py").expect(2).envelope["kind"] == "usage"


def test_importing_a_pipeline_file_starts_no_work(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset, sensor, task, Schedule, Manual

        @asset(retries=2, freshness=Manual)
        def a() -> int:
            open("ran-a", "w").close()
            return 1

        @sensor(freshness=Schedule("*/5 * * * *"))
        def s() -> int:
            open("ran-s", "w").close()
            return 2

        @task(inputs={"a": a})
        def t(a: int) -> int:
            open("ran-t", "w").close()
            return a
    """})
    subprocess.run([sys.executable, "-c", "import p"], cwd=project, env=barca_env(),
                   check=True)
    assert not list(project.glob("ran-*"))  # importing ran no function
    assert not (project / ".barca").exists()
    script = "import p; print(p.a(), p.t(5), p.s())"
    out = subprocess.run([sys.executable, "-c", script], cwd=project, env=barca_env(),
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["1", "5", "2"]  # decorated functions stay plain callables
    assert not (project / ".barca").exists()


def test_unknown_decorator_argument_fails_at_import_too(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset

        @asset(after=1)
        def a() -> int:
            return 1
    """})
    proc = subprocess.run([sys.executable, "p.py"], cwd=project, env=barca_env(),
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "unexpected keyword argument 'after'" in proc.stderr


def test_planning_never_imports_user_code(project: Path) -> None:
    write(project, {"p.py": """
        from barca import asset

        with open("imported.log", "a") as _fh:  # leaves a mark whenever p is imported
            _fh.write("imported\\n")

        @asset()
        def a() -> int:
            return 1

        @asset(inputs={"a": a})
        def b(a: int) -> int:
            return a + 1
    """})
    barca(project, "list", "p.py").expect(0)
    barca(project, "plan", "p.py").expect(0)
    barca(project, "status", "p.py").expect(0)
    barca(project, "get", "b", "p.py", "--dry-run").expect(0)
    assert not (project / "imported.log").exists()
    barca(project, "get", "b", "p.py").expect(0)  # control: running does import it
    assert (project / "imported.log").exists()


# --- bad definitions ----------------------------------------------------------------------

GOOD = """
    from barca import asset

    @asset()
    def fine() -> int:
        return 1
"""

BAD = {
    "unknown_input": ("""
        from barca import asset

        @asset()
        def a() -> int:
            return 1

        @asset(inputs={"x": nope})
        def b(x: int) -> int:
            return x
    """, {7, 8}, "barca list"),
    "cycle": ("""
        from barca import asset

        @asset()
        def start() -> int:
            return 1

        @asset(inputs={"b": b})
        def a(b: int) -> int:
            return b

        @asset(inputs={"a": a})
        def b(a: int) -> int:
            return a
    """, {7, 8, 11, 12}, "remove"),
    "misspelt_argument": ("""
        from barca import asset

        @asset(retires=3)
        def a() -> int:
            return 1
    """, {3, 4}, "Did you mean retries?"),
    "task_feeds_asset": ("""
        from barca import asset, task

        @task()
        def t() -> int:
            return 1

        @asset(inputs={"t": t})
        def a(t: int) -> int:
            return t
    """, {7, 8}, "@asset"),
    "syntax_error": ("""
        from barca import asset

        @asset()
        def a() -> int
            return 1
    """, {4}, "Fix line 4"),
    "inputs_key_not_a_parameter": ("""
        from barca import asset

        @asset()
        def a() -> int:
            return 1

        @asset(inputs={"y": a})
        def b(x: int) -> int:
            return x
    """, {7, 8}, "parameter"),
    "sensor_with_inputs": ("""
        from barca import asset, sensor

        @asset()
        def a() -> int:
            return 1

        @sensor(inputs={"a": a})
        def s(a: int) -> int:
            return a
    """, {7, 8}, "@asset"),
}

@pytest.mark.parametrize("case", [
    "unknown_input",
    "cycle",
    "misspelt_argument",
    "task_feeds_asset",
    "syntax_error",
    "inputs_key_not_a_parameter",
    "sensor_with_inputs",
])
def test_bad_definition_is_exit_2_naming_file_line_and_fix(project: Path, case: str) -> None:
    source, lines, fix = BAD[case]
    write(project, {"good.py": GOOD, "bad.py": source})
    result = barca_here(project, "get", "fine").expect(2)  # one bad file blocks every command
    assert result.stdout == ""
    assert not (project / ".barca" / "artifacts").exists()
    envelope = result.envelope
    assert envelope["kind"] == "usage" and envelope["code"] == 2
    message = envelope["error"] + "\n" + (envelope["remediation"] or "")
    assert "bad.py" in message
    assert fix in message
    found = {int(n) for n in re.findall(r"\bline (\d+)", message)}
    assert found & lines, f"no line of {sorted(lines)} named in: {message}"


def test_bad_definition_in_human_mode_is_prose_without_a_traceback(project: Path) -> None:
    write(project, {"bad.py": BAD["misspelt_argument"][0]})
    result = barca(project, "list", "--pretty").expect(2)
    assert result.stdout == ""
    assert "bad.py" in result.stderr and "line 3" in result.stderr
    assert "Did you mean retries?" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, text", [
    (["get", "nope"], "barca list"),
    (["get", "dup"], "a.py:dup"),
    (["get", "a,,b"], "a,,b"),
    (["get", "dup", "missing.py"], "missing.py"),
    (["run", "a.py"], "barca run"),
])
def test_bad_targets_and_files_are_usage_errors(project: Path, args, text) -> None:
    dup = """
        from barca import asset

        @asset()
        def dup() -> int:
            return 1
    """
    write(project, {"a.py": dup, "b.py": dup})
    result = barca_here(project, *args).expect(2)
    envelope = result.envelope
    assert envelope["kind"] == "usage"
    assert text in envelope["error"] + (envelope["remediation"] or "")
    assert not (project / ".barca").exists()


def test_no_pipeline_file_found_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "plain.py").write_text("x = 1\n")
    result = barca_here(tmp_path, "get").expect(2)
    assert "from barca import" in result.envelope["remediation"]


def test_every_public_decorator_argument_is_accepted(project: Path) -> None:
    write(project, {"p.py": """
        from barca import Always, Manual, Schedule, asset, sensor, task

        @sensor(name="feed", freshness=Schedule("*/5 * * * *"), retries=2, retry_backoff=0.1,
                timeout_seconds=30, description="watches", tags={"team": "data"},
                serializer="json", env=["REGION"])
        def watch_feed() -> str:
            return "v1"

        @asset(inputs={"feed": watch_feed}, env=["REGION"], freshness=Manual, retries=2,
               retry_backoff=0.1, timeout_seconds=30, name="numbers", description="numbers",
               tags={"team": "data"}, serializer="pickle", cutoff=True)
        def make_numbers(feed: str) -> list:
            return [1, 2, 3]

        @asset(inputs={"numbers": make_numbers}, freshness=Always)
        def total(numbers: list) -> int:
            return sum(numbers)

        @task(inputs={"total": total}, env=["REGION"], freshness=Schedule("0 * * * *"),
              retries=1, retry_backoff=0.0, timeout_seconds=30, name="ship",
              description="ships", tags={"kind": "io"}, serializer="json")
        def ship_total(total: int) -> str:
            return f"shipped {total}"
    """})
    subprocess.run([sys.executable, "-c", "import p"], cwd=project, env=barca_env(),
                   check=True)
    listed = barca(project, "list", "p.py").expect(0).json
    fresh = {n["id"]: n["freshness"] for n in listed["nodes"]}
    assert fresh == {"p.py:feed": "schedule", "p.py:numbers": "manual", "p.py:total": "always",
                     "p.py:ship": "schedule"}
    # numbers is Manual: computed when --refresh names it
    result = barca(project, "run", "ship", "p.py", "--refresh", "numbers").expect(0)
    assert result.json["final_output"] == "shipped 6"
    assert (project / ".barca/artifacts/p.py--numbers").is_dir()
    assert next((project / ".barca/artifacts/p.py--numbers").iterdir()).suffix == ".pkl"
