"""`[cache] max_size` in barca.toml: after every `get` and `run` whose results take more than
it, barca removes what `barca gc` would, oldest first, down to 80% of it, and says so (stderr
and `cache` in the JSON); current results are never removed. `barca doctor` checks barca.toml
(its `config` check) instead of failing on it."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, write

PIPELINE = """
    import os
    from barca import asset

    @asset(env=["VERSION"], serializer="pickle")
    def blob() -> bytes:
        return os.environ["VERSION"].encode() * 100_000

    @asset(env=["VERSION"], inputs={"blob": blob})
    def size(blob: bytes) -> int:
        return len(blob)
"""


def _artifacts(root: Path) -> list[Path]:
    return sorted(p for p in (root / ".barca" / "artifacts").rglob("*") if p.is_file())


def test_a_run_over_max_size_removes_superseded_results_oldest_first(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "[cache]\nmax_size = \"250KB\"\n", "pipeline.py": PIPELINE})
    first = barca(tmp_path, "get", "size", "pipeline.py", env={"VERSION": "1"}).expect(0)
    assert "cache" not in first.json and "[barca] cache" not in first.stderr  # 100 KB: fits
    older = {p.name for p in _artifacts(tmp_path)}
    second = barca(tmp_path, "get", "size", "pipeline.py", env={"VERSION": "2"}).expect(0)
    # 200 KB of blobs (and two tiny results): over 250 KB? no, still fits
    assert "cache" not in second.json
    third = barca(tmp_path, "get", "size", "pipeline.py", env={"VERSION": "3"}).expect(0)
    cache = third.json["cache"]
    assert cache["limit_bytes"] == 250_000 and cache["size_bytes"] > 300_000
    assert cache["evicted_files"] >= 1 and cache["after_bytes"] <= 200_000
    assert any(line.startswith("[barca] cache ") and "over its" in line and
               "([cache] max_size); removed" in line for line in third.stderr.splitlines())
    left = {p.name for p in _artifacts(tmp_path)}
    assert not older & left  # the oldest results went first
    # the current results stayed: the same command is served from cache
    again = barca(tmp_path, "get", "size", "pipeline.py", env={"VERSION": "3"}).expect(0)
    assert again.json["steps_executed"] == 0 and again.json["final_output"] == 100_000
    assert "cache" not in again.json


def test_current_results_over_max_size_are_kept_with_a_warning(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "[cache]\nmax_size = 1000\n", "pipeline.py": PIPELINE})
    got = barca(tmp_path, "get", "size", "pipeline.py", env={"VERSION": "1"}).expect(0)
    assert got.json["cache"]["evicted_files"] == 0
    assert any(line.startswith("[barca] warning: current results take ") and
               line.endswith("gc never removes them") for line in got.stderr.splitlines())
    assert barca(tmp_path, "get", "size", "pipeline.py",
                 env={"VERSION": "1"}).expect(0).json["steps_executed"] == 0


def test_a_dry_run_and_a_project_without_max_size_remove_nothing(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": PIPELINE})
    for version in ("1", "2"):
        got = barca(tmp_path, "get", "size", "pipeline.py", env={"VERSION": version}).expect(0)
        assert "cache" not in got.json
    assert len(_artifacts(tmp_path)) == 4
    (tmp_path / "barca.toml").write_text("[cache]\nmax_size = 1000\n")
    dry = barca(tmp_path, "get", "size", "pipeline.py", "--dry-run", env={"VERSION": "3"})
    assert "cache" not in dry.expect(0).json
    assert len(_artifacts(tmp_path)) == 4


def _config(result) -> dict:
    return next(c for c in result.json["checks"] if c["name"] == "config")


def test_doctor_checks_barca_toml(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "[run]\ncapacity = 3\n[cache]\nmax_size = \"2GB\"\n",
                     "pipeline.py": PIPELINE})
    config = _config(barca(tmp_path, "doctor", env={"BARCA_POOL_SIZE": "2"}).expect(0))
    assert config["ok"] is True
    assert config["data"] == {"capacity": 3, "capacity_source": "[run] capacity",
                              "pool_size": 2, "cache_max_size": 2_000_000_000,
                              "cache_max_size_source": "[cache] max_size"}
    assert config["detail"].startswith("capacity 3 ([run] capacity), cache trimmed after each")

    (tmp_path / "barca.toml").write_text("[run]\ncapacity = 3\n[discovery]\nexclude = ['x']\n")
    bad = barca(tmp_path, "doctor").expect(3)
    config = _config(bad)
    assert config["ok"] is False
    assert config["detail"] == "barca.toml: [discovery] is not supported by this barca yet"
    assert "name the pipeline files" in config["fix"]
    assert bad.envelope["error"] == "doctor found 1 problem: config"
    # the other checks still ran
    assert [c["name"] for c in bad.json["checks"] if not c["ok"]] == ["config"]

    (tmp_path / "barca.toml").write_text("[run]\ncapacity = 3\n")
    human = barca(tmp_path, "doctor", "--pretty", env={"BARCA_CAPACITY": "x"}).expect(3)
    assert "[error] config: BARCA_CAPACITY='x' is not a positive integer; fix: set " \
        "BARCA_CAPACITY to 1 or more" in human.stdout
