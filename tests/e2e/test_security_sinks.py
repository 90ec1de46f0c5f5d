"""Sinks in a directory other users can write to (issue 26, item 9; `barca docs assets`,
"Sinks").

An export directory is often shared, and barca may run as root. A sink writes through a new
temporary file of a random name made with O_EXCL, then renames it into place: a symlink
planted at the name it used to take (`.<name>.<pid>.tmp`) is never written through, and a
symlink of another user at the sink's own path is refused. Two assets whose sinks can write
one file are a load error naming both; a dataset sink cuts a long key's directory name as a
file sink cuts its file name. Real `barca` runs; what is on disk afterwards is checked.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from conftest import barca, write

NOBODY = 65534


def test_a_symlink_planted_at_the_old_temporary_name_is_not_written_through(
        project: Path) -> None:
    victim = project.parent / f"{project.name}-victim.txt"
    victim.write_text("a file of the user barca runs as\n")
    write(project, {"pipeline.py": f"""
        import os
        from pathlib import Path

        from barca import asset, sink

        def _plant(name):
            # another user of the shared directory, who guessed the writer's temporary name
            os.symlink({str(victim)!r}, f"exports/.{{name}}.{{os.getpid()}}.tmp")

        @asset()
        @sink("exports/summary.json")   # the artifact's bytes, copied
        @sink("exports/summary.pkl")    # the value written again, as a pickle
        def summary() -> dict:
            _plant("summary.json")
            _plant("summary.pkl")
            return {{"total": 3}}
    """})
    exports = project / "exports"
    exports.mkdir()
    for name in ("summary.json", "summary.pkl"):  # replaced, not created
        (exports / name).write_text("last week's export")
    got = barca(project, "get", "summary", "pipeline.py").expect(0)
    assert "SINK FAILED" not in got.stderr, got.stderr
    assert victim.read_bytes() == b"a file of the user barca runs as\n"
    assert not (exports / "summary.json").is_symlink()
    assert json.loads((exports / "summary.json").read_text()) == {"total": 3}
    assert pickle.loads((exports / "summary.pkl").read_bytes()) == {"total": 3}
    planted = sorted(p.name for p in exports.iterdir() if p.name.endswith(".tmp"))
    assert len(planted) == 2 and all((exports / p).is_symlink() for p in planted)  # untouched


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a symlink to another user")
def test_a_symlink_of_another_user_on_the_way_to_a_sink_is_refused(project: Path) -> None:
    victim = project.parent / f"{project.name}-victim.txt"
    victim.write_text("root's file\n")
    victim_dir = project.parent / f"{project.name}-victim-dir"
    victim_dir.mkdir()
    write(project, {"pipeline.py": """
        from barca import asset, partitions, sink

        @asset(partitions={"region": partitions(["emea"])})
        @sink("exports/report.json")
        @sink("exports/dataset/")
        @sink("exports/fine.json", serializer="json")
        def report(region: str) -> dict:
            return {"region": region}
    """})
    exports = project / "exports"
    (exports / "dataset").mkdir(parents=True)
    planted = [exports / "report_region_emea.json", exports / "dataset" / "region=emea"]
    planted[0].symlink_to(victim)
    planted[1].symlink_to(victim_dir, target_is_directory=True)
    for link in planted:
        os.lchown(link, NOBODY, NOBODY)
    got = barca(project, "get", "report", "pipeline.py").expect(0)
    failures = [line for line in got.stderr.splitlines() if "SINK FAILED" in line]
    assert len(failures) == 2, got.stderr
    for line, link in zip(failures, planted):
        assert f"{link} is a symlink of another user (uid {NOBODY})" in line, line
    assert victim.read_text() == "root's file\n"
    assert list(victim_dir.iterdir()) == []
    assert all(link.is_symlink() for link in planted)
    assert json.loads((exports / "fine_region_emea.json").read_text()) == {"region": "emea"}


COLLIDING = {
    "the same path": ("""
        @asset()
        @sink("exports/out.json")
        def a() -> int:
            return 1

        @asset()
        @sink("./exports/../exports/out.json")
        def b() -> int:
            return 2
    """, "both write @sink('exports/out.json')"),
    "per-key names": ("""
        @asset(partitions={"k": partitions(["x_y"])})
        @sink("exports/out.json")
        def a(k: str) -> int:
            return 1

        @asset(partitions={"k_x": partitions(["y"])})
        @sink("exports/out.json")
        def b(k_x: str) -> int:
            return 2
    """, "can both write the sink file exports/out_k_x_"),
    "a key's file and a fixed path": ("""
        @asset(partitions={"k": partitions(["1"])})
        @sink("exports/")
        def a(k: str) -> int:
            return 1

        @asset()
        @sink("exports/k=1/data.json")
        def b() -> int:
            return 2
    """, "can both write the sink file exports/k=1/data.json"),
}


@pytest.mark.parametrize("case", list(COLLIDING))
def test_two_assets_whose_sinks_can_write_one_file_are_a_load_error(
        project: Path, case: str) -> None:
    body, words = COLLIDING[case]
    write(project, {"pipeline.py": "\n        from barca import asset, partitions, sink\n" + body})
    for command in (["get", "pipeline.py"], ["list", "pipeline.py"]):
        bad = barca(project, *command).expect(2)
        error = bad.envelope["error"]
        assert bad.envelope["kind"] == "usage"
        assert "pipeline.py:a (line " in error and "pipeline.py:b (line " in error, error
        assert words in error, error
        assert "give each sink a path of its own" in bad.envelope["remediation"]
    assert not (project / "exports").exists()


def test_a_dataset_sink_cuts_a_long_key_as_a_file_sink_does(project: Path) -> None:
    long_keys = ["r" * 300, "r" * 299 + "s"]  # the same first 200 characters
    write(project, {"pipeline.py": f"""
        from barca import asset, partitions, sink

        @asset(partitions={{"k": partitions({long_keys!r})}})
        @sink("exports/dataset/")
        @sink("exports/flat.json")
        def sized(k: str) -> dict:
            return {{"length": len(k), "last": k[-1]}}
    """})
    got = barca(project, "get", "sized", "pipeline.py").expect(0)
    assert "SINK FAILED" not in got.stderr, got.stderr
    dirs = sorted((project / "exports" / "dataset").iterdir())
    assert len(dirs) == 2
    found = []
    for d in dirs:
        assert d.name.startswith("k=rrrr") and len(d.name.encode()) <= 255, d.name
        found.append(json.loads((d / "data.json").read_text()))
    assert sorted(found, key=lambda v: v["last"]) == [{"length": 300, "last": "r"},
                                                      {"length": 300, "last": "s"}]
    flat = [p for p in (project / "exports").iterdir() if p.name.startswith("flat_")]
    assert len(flat) == 2
