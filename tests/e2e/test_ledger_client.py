"""A machine that names a server as its ledger (`[server] url` in barca.toml or BARCA_SERVER):
every way into a get (the command, its quick kept answer, barca.get in Python) asks the
server's ledger, never a local answer; a local copy that is not the ledger's bytes is fetched
again; and `--env` with `--server` must be the server's. Real `barca serve` on loopback, a
real S3 endpoint (moto's server mode through s3fs), the real CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import MOTO_SERVER, Moto, barca, write

pytest.importorskip("s3fs")
if not MOTO_SERVER.exists():
    pytest.skip("moto[server] is not installed (pip install -e '.[dev]')",
                allow_module_level=True)

DOWN = "http://127.0.0.1:9"  # nothing listens there

PLAIN = """
from barca import asset

@asset
def numbers() -> list:
    return list(range(10))
"""


def _remote(bucket: str) -> str:
    return f'[remote]\nuri = "s3://{bucket}/team"\n'


def test_a_kept_answer_is_not_given_when_barca_toml_names_a_server(tmp_path: Path,
                                                                   moto: Moto) -> None:
    """A `--local` get keeps its answer (a fact of this machine's records); a plain get with
    `[server] url` set goes to the server all the same, as with BARCA_SERVER: here it cannot
    be reached, which is exit 3 naming it, never the kept local answer."""
    toml = _remote(moto.bucket()) + f'[server]\nurl = "{DOWN}"\n'
    root = write(tmp_path / "p", {"pipeline.py": PLAIN, "barca.toml": toml})
    for _ in range(2):  # the second is answered from the answer the first kept
        local = barca(root, "get", "numbers", "pipeline.py", "--local", env=moto.env).expect(0)
        assert local.json["final_output"] == list(range(10))
    assert list((root / ".barca" / "answers").glob("*.answer"))  # the answer it kept
    bad = barca(root, "get", "numbers", "pipeline.py", env=moto.env).expect(3)
    assert DOWN in bad.envelope["error"], bad.stderr
    assert f"[barca] server {DOWN} ([server] url)" in bad.stderr
