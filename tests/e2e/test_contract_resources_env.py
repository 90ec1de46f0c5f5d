"""`env=` values are shown per step: `steps[].env {NAME: value|null}` in `get --json` (and its
dry run), and an ` env NAME=VALUE ...` tail on the node's `--agent` step lines, with `<unset>`,
`<redacted>` for secret-looking names and quotes around values with spaces."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import barca, write

PIPELINE = """
    import os
    from barca import asset, partitions

    @asset(env=["REGION", "API_TOKEN", "NOT_SET", "GREETING"])
    def config() -> dict:
        return {"region": os.environ.get("REGION")}

    @asset(inputs={"config": config}, partitions={"k": partitions(["a", "b"])},
           env=["REGION"])
    def per_key(k: str, config: dict) -> str:
        return k + config["region"]

    @asset()
    def plain() -> int:
        return 1
"""

ENV = {"REGION": "eu", "API_TOKEN": "s3cr3t", "NOT_SET": None, "GREETING": "hello there"}
SHOWN = {"REGION": "eu", "API_TOKEN": "<redacted>", "NOT_SET": None,
         "GREETING": "hello there"}
TAIL = ' env REGION=eu API_TOKEN=<redacted> NOT_SET=<unset> GREETING="hello there"'


def test_env_values_are_shown_per_step_in_json_and_agent_lines(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": PIPELINE})
    dry = barca(tmp_path, "get", "per_key,plain", "pipeline.py", "--dry-run", env=ENV)
    dry.expect(0)
    assert dry.steps["config"]["env"] == SHOWN
    assert dry.steps["per_key"]["env"] == {"REGION": "eu"}
    assert "env" not in dry.steps["plain"]

    got = barca(tmp_path, "get", "per_key,plain", "pipeline.py", "--agent", env=ENV).expect(0)
    assert got.steps["config"]["env"] == SHOWN
    assert got.steps["per_key"]["env"] == {"REGION": "eu"}
    assert "env" not in got.steps["plain"]
    lines = got.stderr.splitlines()
    config = [line for line in lines if line.startswith("[barca] step:pipeline.py:config ")]
    assert len(config) == 1 and re.fullmatch(
        r"\[barca\] step:pipeline\.py:config completed \d+\.\d\ds \(\d/\d\)" + re.escape(TAIL),
        config[0]), config
    keys = [line for line in lines if line.startswith("[barca] step:pipeline.py:per_key[")]
    assert len(keys) == 2 and all(line.endswith(") env REGION=eu") for line in keys), keys
    plain = [line for line in lines if line.startswith("[barca] step:pipeline.py:plain ")]
    assert len(plain) == 1 and " env " not in plain[0]
    assert "s3cr3t" not in got.stderr and "s3cr3t" not in got.stdout

    # cached: the same values on the cached lines
    again = barca(tmp_path, "get", "per_key", "pipeline.py", "--agent", env=ENV).expect(0)
    assert again.steps["config"] == {**again.steps["config"], "status": "cached", "env": SHOWN}
    assert f"[barca] step:pipeline.py:config cached{TAIL}" in again.stderr.splitlines()
    assert "[barca] step:pipeline.py:per_key cached (2 keys) env REGION=eu" in \
        again.stderr.splitlines()

    # a changed value reruns and shows the new value
    other = barca(tmp_path, "get", "per_key", "pipeline.py", env={**ENV, "REGION": "us"})
    assert other.expect(0).steps["per_key"]["env"] == {"REGION": "us"}
    assert other.steps["per_key"]["status"] == "ran"
