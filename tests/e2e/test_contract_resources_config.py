"""`barca.toml`: an unknown section or key, a bad value, or a setting of something this barca
does not have yet stops every command that opens the project with exit 2 naming it (and the
known settings), before anything runs or is written; nothing in it is silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import barca, drive, write

PIPELINE = """
    from barca import asset

    @asset()
    def a() -> int:
        with open("ran.log", "a") as fh:
            fh.write("a\\n")
        return 1
"""

KNOWN = ("the known settings: [run] capacity, [cache] max_size, [serve] token, [remote] uri, "
         "[remote] storage_options, [server] url, [server] shared_capacity, [executor] kind")


def _project(root: Path, toml: str) -> Path:
    return write(root, {"barca.toml": toml, "pipeline.py": PIPELINE})


@pytest.mark.parametrize("toml, error, remediation", [
    ("[runn]\ncapacity = 2\n", "barca.toml: unknown section [runn]",
     f"remove or rename it; {KNOWN}"),
    ("[run]\ncapasity = 2\n", "barca.toml: unknown key 'capasity' in [run]",
     f"[run] takes capacity; {KNOWN}"),
    ("[cache]\nmax-size = '1GB'\n", "barca.toml: unknown key 'max-size' in [cache]",
     f"[cache] takes max_size; {KNOWN}"),
    ("capacity = 2\n", "barca.toml: unknown key 'capacity'", f"remove or rename it; {KNOWN}"),
    ("[run]\ncapacity = 'many'\n",
     "barca.toml: [run] capacity must be a positive integer, not 'many'", None),
    ("[cache]\nmax_size = 'lots'\n", "barca.toml: [cache] max_size must be a size, not 'lots'",
     None),
    ("[remote]\nuri = 'bucket'\n", "barca.toml: [remote] uri must be a URL, not 'bucket'",
     None),
    ("[remote]\nuri = 's3://b'\nstorage_options = 'x'\n",
     "barca.toml: [remote] storage_options must be a table, not 'x'", None),
    ("[remote]\nstate = 'off'\n", "barca.toml: unknown key 'state' in [remote]",
     f"[remote] takes uri, storage_options; {KNOWN}"),
    ("[executor]\nkind = 'spark'\n",
     "barca.toml: [executor] kind must be one of local, ray, not 'spark'", None),
])
def test_an_unknown_or_bad_setting_is_exit_2_naming_it(tmp_path: Path, toml: str, error: str,
                                                       remediation: str | None) -> None:
    _project(tmp_path, toml)
    bad = barca(tmp_path, "get", "a", "pipeline.py").expect(2)
    assert bad.envelope["error"] == error
    assert bad.envelope["kind"] == "usage"
    if remediation is not None:
        assert bad.envelope["remediation"] == remediation
    assert bad.stdout == ""
    assert not (tmp_path / "ran.log").exists()
    assert not (tmp_path / ".barca").exists()


@pytest.mark.parametrize("toml, name, instead", [
    ("[discovery]\nexclude = ['old/**']\n", "[discovery]", "name the pipeline files"),
    ("default_env = 'staging'\n", "`default_env`", "set BARCA_ENV or pass --env NAME"),
])
def test_a_setting_not_built_yet_is_exit_2_saying_so(tmp_path: Path, toml: str, name: str,
                                                     instead: str) -> None:
    _project(tmp_path, toml)
    bad = barca(tmp_path, "get", "a", "pipeline.py").expect(2)
    assert bad.envelope["error"] == f"barca.toml: {name} is not supported by this barca yet"
    assert instead in bad.envelope["remediation"]
    assert not (tmp_path / ".barca").exists()


def test_every_command_that_opens_the_project_checks_it(tmp_path: Path) -> None:
    _project(tmp_path, "[run]\ncapacity = 2\n[extras]\n")
    for args in (["get", "a", "pipeline.py"], ["run", "pipeline.py"], ["status", "pipeline.py"],
                 ["list", "pipeline.py"], ["plan", "pipeline.py"], ["history"], ["gc"],
                 ["get", "a", "pipeline.py", "--dry-run"]):
        bad = barca(tmp_path, *args).expect(2)
        assert bad.envelope["error"] == "barca.toml: unknown section [extras]", args
    # in a terminal: prose, the known settings on the last line
    human = barca(tmp_path, "status", "pipeline.py", "--pretty").expect(2)
    assert human.stderr.splitlines()[-2:] == [
        "error: barca.toml: unknown section [extras]", f"  remove or rename it; {KNOWN}"]
    # the Python API raises the same error
    out = drive(tmp_path, """
import json
import barca
from barca.errors import UsageError
try:
    barca.get("a", "pipeline.py")
except UsageError as exc:
    print(json.dumps({"error": exc.message}))
""")
    assert out == {"error": "barca.toml: unknown section [extras]"}


def test_invalid_toml_is_exit_2(tmp_path: Path) -> None:
    _project(tmp_path, "[run\ncapacity = 2\n")
    bad = barca(tmp_path, "get", "a", "pipeline.py").expect(2)
    assert bad.envelope["error"].startswith("barca.toml is not valid TOML: ")
    assert bad.envelope["remediation"] == ("fix the syntax; the settings it may hold: "
                                           "[run] capacity, [cache] max_size, [serve] token, "
                                           "[remote] uri, [remote] storage_options, "
                                           "[server] url, [server] shared_capacity, "
                                           "[executor] kind")


def test_known_settings_and_an_empty_file_are_accepted(tmp_path: Path) -> None:
    _project(tmp_path, "")
    assert barca(tmp_path, "get", "a", "pipeline.py").expect(0).json["final_output"] == 1
    (tmp_path / "barca.toml").write_text(
        "# settings\n[run]\ncapacity = 3\n\n[cache]\nmax_size = \"2GiB\"\n")
    assert barca(tmp_path, "get", "a", "pipeline.py").expect(0).json["final_output"] == 1
    (tmp_path / "barca.toml").write_text("[cache]\nmax_size = 1000000\n")
    assert barca(tmp_path, "status", "pipeline.py").expect(0).json["summary"]["cached"] == 1
