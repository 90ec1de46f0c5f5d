"""Security cases of issue 13, each as it was found, on the real CLI: a node name that leads
out of the project, and `barca sql` reaching the filesystem or the metadata database."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import tempfile
from pathlib import Path

import pytest

from conftest import barca, pool_processes, stop_pools, wait_for, write

ESCAPING = """
    from barca import asset

    @asset(name="x/../../../{target}")
    def escaped() -> int:
        return 1
"""


@pytest.mark.parametrize("name", ["x/../../../{target}", "../up", "a.b", "1st", "with-dash"])
def test_a_node_name_must_be_an_identifier_and_nothing_is_written(project: Path, tmp_path, name):
    target = tmp_path / "ESCAPED"
    write(project, {"p.py": ESCAPING.replace('x/../../../{target}', name.format(
        target=target))})
    result = barca(project, "get", "p.py").expect(2)
    assert result.envelope["kind"] == "usage"
    assert "name=" in result.envelope["error"] and "identifier" in result.envelope["error"]
    assert not target.exists() and not (project / ".barca" / "artifacts").exists()


SQL_PIPELINE = """
    from barca import asset

    @asset()
    def orders() -> list:
        return [{"customer": "ada", "amount": 120.0}]
"""


@pytest.fixture
def computed(project: Path) -> Path:
    write(project, {"p.py": SQL_PIPELINE})
    barca(project, "get", "orders", "p.py").expect(0)
    return project


@pytest.mark.parametrize("query", [
    "copy (select 1) to '.barca/metadata.db'",
    "copy (select 1 as customer) to '{artifact}' (USE_TMP_FILE false)",
    "select * from read_text('/etc/passwd')",
    "select * from read_csv_auto('{outside}')",
    "copy (select 1) to '{outside}'",
    "attach '{outside}.db' as other",
    "install httpfs",
    "load httpfs",
    "set enable_external_access = true",
    "create table t as select 1",
    "select 1; copy (select 1) to '{outside}'",
])
def test_sql_cannot_reach_files_or_write_anything(computed: Path, tmp_path, query):
    artifact = next((computed / ".barca" / "artifacts").rglob("*.json"))
    before = artifact.read_bytes()
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    written = query.format(artifact=artifact, outside=outside)
    result = barca(computed, "sql", written).expect(2)
    assert result.envelope["kind"] == "usage"
    assert artifact.read_bytes() == before
    assert outside.read_text() == "a\n1\n" and not Path(f"{outside}.db").exists()
    # the metadata is intact: the result is still served from cache
    again = barca(computed, "get", "orders", "p.py").expect(0).json
    assert again["steps_executed"] == 0 and again["final_output"][0]["customer"] == "ada"


def test_sql_still_reads_the_views(computed: Path):
    rows = barca(computed, "sql", "select customer from orders").expect(0).json["rows"]
    assert rows == [{"customer": "ada"}]
    tables = barca(computed, "sql", "show tables").expect(0).json["rows"]
    assert {"name": "orders"} in tables


# -- the warm pool's socket -------------------------------------------------------------------

PROBE = """
    from barca import asset

    @asset()
    def probe() -> int:
        return 7
"""


@pytest.fixture
def pool_env():
    """The pool on, its state under a TMPDIR of its own, short enough for a socket path
    (108 bytes; pytest's temp paths under xdist are longer)."""
    temp = tempfile.mkdtemp(prefix="bs", dir="/tmp")
    yield {"BARCA_WARM_SECONDS": "60", "TMPDIR": temp, "XDG_RUNTIME_DIR": None}
    shutil.rmtree(temp, ignore_errors=True)


def test_a_symlinked_state_directory_is_not_used(project: Path, tmp_path, pool_env):
    env = pool_env
    elsewhere = tmp_path / "planted"
    elsewhere.mkdir(mode=0o700)
    (Path(env["TMPDIR"]) / f"barca-{os.getuid()}").symlink_to(elsewhere)
    write(project, {"p.py": PROBE})
    try:
        assert barca(project, "get", "probe", "p.py", env=env).expect(0).json[
            "final_output"] == 7
        # no pool was started (or the one started refused the directory and ended), so
        # nothing binds a socket there later
        wait_for(lambda: not pool_processes(project), "no warm pool to run", timeout=30)
        assert list(elsewhere.iterdir()) == []
    finally:
        stop_pools(project)


@pytest.mark.skipif(os.getuid() != 0, reason="listening as another user needs root")
def test_a_pool_socket_served_by_another_user_is_never_talked_to(project: Path, pool_env):
    from barca.engine.local import pool_messages, pool_registry, warm_pool

    env = pool_env
    write(project, {"p.py": PROBE})
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in env.items() if v is not None and
                       not k.startswith("BARCA_")})
    os.environ.pop("XDG_RUNTIME_DIR", None)
    try:  # the socket the run will look for, computed as the run computes it
        directory = pool_registry.state_dir()
        sock_path, _ = pool_registry.paths(directory, warm_pool.identity(project))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    report_r, report_w = os.pipe()  # the impostor cannot reach pytest's 0700 temp dirs
    pid = os.fork()
    if pid == 0:  # the impostor: listens as nobody on the pool's path, reports what it hears
        try:
            os.close(report_r)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            listener.bind(str(sock_path))
            os.chmod(sock_path, 0o777)
            os.setuid(65534)
            listener.listen(4)
            os.write(report_w, b"listening;")
            while True:
                conn, _ = listener.accept()
                os.write(report_w, b"accepted;")
                data = conn.recv(1 << 20)
                if data:
                    os.write(report_w, b"heard:" + data + b";")
                    conn.send(pool_messages.encode(pool_messages.Welcome([], os.getpid())))
                conn.close()
        finally:
            os._exit(0)
    os.close(report_w)
    try:
        assert os.read(report_r, len(b"listening;")) == b"listening;"  # blocks until it is
        assert barca(project, "get", "probe", "p.py", env=env).expect(0).json[
            "final_output"] == 7
        os.set_blocking(report_r, False)
        report = os.read(report_r, 1 << 20)
        assert report.startswith(b"accepted;")  # the run did find the impostor's socket...
        assert b"heard" not in report  # ...and left it without a word
    finally:
        os.close(report_r)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        stop_pools(project)
