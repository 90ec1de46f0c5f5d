"""A cache size limit by default, as 0.33: `[cache] max_size` is 10% of the filesystem that
holds `.barca/` unless set (`"10%"`, `"off"`, sizes; `BARCA_CACHE_MAX_SIZE` wins, a bad value
is exit 2 naming it). A trim never removes what its own run computed or served (it prints it
next), nor a superseded result while another run is live; it says what it removed."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from conftest import barca, poll, start_barca, write

PIPELINE = """
    import os, pathlib, time
    from barca import asset

    @asset(env=["VERSION"], serializer="pickle")
    def blob() -> bytes:
        return os.environ["VERSION"].encode() * 100_000

    @asset(env=["VERSION"], inputs={"blob": blob})
    def first(blob: bytes) -> str:
        return blob[:1].decode()

    @asset(env=["VERSION"], inputs={"blob": blob})
    def slow(blob: bytes) -> str:
        pathlib.Path("slow-started").touch()
        while not pathlib.Path("go").exists():
            time.sleep(0.05)
        return blob[:1].decode()
"""


def _blobs(root: Path) -> dict[str, Path]:
    """The blob result files by the version they hold."""
    files = (root / ".barca" / "artifacts" / "pipeline.py--blob").glob("*.pkl")
    return {path.read_bytes()[-3:-2].decode(): path for path in files}


def _config(root: Path, **env: str) -> dict:
    body = barca(root, "doctor", env=env).expect(0).json
    return next(c for c in body["checks"] if c["name"] == "config")


def test_the_default_is_ten_percent_of_the_filesystem_and_can_be_set_or_off(tmp_path: Path
                                                                            ) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": PIPELINE})
    total = shutil.disk_usage(tmp_path).total
    config = _config(tmp_path)
    assert config["data"]["cache_max_size"] == int(total * 10 / 100)
    assert config["data"]["cache_max_size_source"] == "default"
    assert config["detail"].endswith("(the default max_size, 10% of the filesystem)")

    (tmp_path / "barca.toml").write_text('[cache]\nmax_size = "5%"\n')
    assert _config(tmp_path)["data"]["cache_max_size"] == int(total * 5 / 100)
    (tmp_path / "barca.toml").write_text('[cache]\nmax_size = "off"\n')
    assert _config(tmp_path)["data"]["cache_max_size"] is None
    # the variable wins over barca.toml
    data = _config(tmp_path, BARCA_CACHE_MAX_SIZE="2GiB")["data"]
    assert (data["cache_max_size"], data["cache_max_size_source"]) == \
        (2 * 2**30, "BARCA_CACHE_MAX_SIZE")

    bad = barca(tmp_path, "get", "first", "pipeline.py", env={"BARCA_CACHE_MAX_SIZE": "lots",
                                                                "VERSION": "1"}).expect(2)
    assert bad.envelope["error"] == "BARCA_CACHE_MAX_SIZE='lots' is not a cache size"
    assert not (tmp_path / ".barca" / "artifacts").exists()  # refused before anything ran
    (tmp_path / "barca.toml").write_text('[cache]\nmax_size = "120%"\n')
    assert "[cache] max_size must be a size" in barca(
        tmp_path, "get", "first", "pipeline.py").expect(2).envelope["error"]


def test_a_share_of_the_filesystem_trims_and_keeps_what_the_run_returns(tmp_path: Path
                                                                       ) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": PIPELINE})
    for version in "123":
        got = barca(tmp_path, "get", "first", "pipeline.py", env={"VERSION": version})
        assert "cache" not in got.expect(0).json  # far below 10% of the filesystem
    assert sorted(_blobs(tmp_path)) == ["1", "2", "3"]
    # a share that is about 150 KB here: the three blobs take over 300 KB
    percent = f"{150_000 * 100 / shutil.disk_usage(tmp_path).total:.15f}%"
    old = barca(tmp_path, "get", "first", "pipeline.py",
                env={"VERSION": "1", "BARCA_CACHE_MAX_SIZE": percent}).expect(0)
    assert old.json["steps_executed"] == 0 and old.json["final_output"] == "1"
    cache = old.json["cache"]
    assert cache["limit_source"] == "BARCA_CACHE_MAX_SIZE"
    assert 140_000 < cache["limit_bytes"] < 160_000
    # version 1, the oldest, is what this get returns: kept; versions 2 and 3 went
    assert sorted(_blobs(tmp_path)) == ["1"]
    n = cache["evicted_files"]
    assert n >= 2 and cache["evicted_by_reason"] == {"superseded": n}
    line = next(x for x in old.stderr.splitlines() if x.startswith("[barca] cache "))
    assert f"limit (BARCA_CACHE_MAX_SIZE {percent} of the filesystem); removed {n} files " \
        in line
    assert line.endswith(f"oldest first: {n} superseded results")
    again = barca(tmp_path, "get", "first", "pipeline.py", env={"VERSION": "1"}).expect(0)
    assert again.json["steps_executed"] == 0 and again.json["final_output"] == "1"


def test_a_live_run_keeps_the_superseded_results_it_may_read(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": PIPELINE})
    for version in "12":
        barca(tmp_path, "get", "first", "pipeline.py", env={"VERSION": version}).expect(0)
    hour_ago = time.time() - 3600  # written well before the live run started
    for path in (tmp_path / ".barca" / "artifacts").rglob("*"):
        os.utime(path, (hour_ago, hour_ago))
    # a run of version 1 (served its superseded blob from cache) is live, in `slow`
    live = start_barca(tmp_path, "get", "slow", "pipeline.py", env={"VERSION": "1"})
    try:
        poll(lambda: (tmp_path / "slow-started").exists() or live.poll() is not None,
             "the live run to reach its slow step")
        assert live.poll() is None
        limit = {"BARCA_CACHE_MAX_SIZE": "150KB"}
        over = barca(tmp_path, "get", "first", "pipeline.py", env={"VERSION": "3", **limit})
        cache = over.expect(0).json["cache"]
        assert cache["evicted_files"] == 0 and cache["spared_files"] >= 2
        assert sorted(_blobs(tmp_path)) == ["1", "2", "3"]
        assert any(x.startswith("[barca] kept ") and "while another run is live" in x
                   for x in over.stderr.splitlines())
    finally:
        (tmp_path / "go").touch()
        out, err = live.communicate(timeout=60)
    assert live.returncode == 0, err
    # once it has ended, the next run over the limit removes them, oldest first
    after = barca(tmp_path, "get", "first", "pipeline.py",
                  env={"VERSION": "3", "BARCA_CACHE_MAX_SIZE": "150KB"}).expect(0)
    assert after.json["cache"]["evicted_by_reason"]["superseded"] >= 2
    assert sorted(_blobs(tmp_path)) == ["3"]
