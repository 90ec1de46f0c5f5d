"""Environment variables an asset's code reads without declaring them in `env=` (0.33): found
in the function and the project helpers its hash follows, said in one stderr line per command,
listed as `warnings[]` items of kind `undeclared_env`, as `undeclared_env` on steps and status
nodes, and never hashed (a new value reruns nothing)."""

from __future__ import annotations

from pathlib import Path

from conftest import barca, poll, write

HELPERS = """
    import os
    from os import getenv

    def data_dir() -> str:
        return os.environ.get("DATA_DIR", "/tmp")

    def table(kind: str) -> str:
        return getenv(f"{kind}_CSV") or ""

    THRESHOLD = os.environ["THRESHOLD"] if "THRESHOLD" in os.environ else "1"

    def unused() -> str:
        return os.environ["NEVER_REACHED"]
"""

PIPELINE = """
    import os
    from barca import asset, sensor, task
    from helpers import THRESHOLD, data_dir, table

    @asset(env=["REGION"])
    def declared() -> str:
        os.environ["WRITTEN"] = "1"  # a write, not a read
        return os.environ.get("REGION", "") + os.environ.get("BARCA_ENV", "")

    @asset(inputs={"declared": declared})
    def report(declared: str) -> str:
        return declared + data_dir() + table("sales") + THRESHOLD + os.getenv("API_URL", "")

    @asset(env=["SALES_CSV"])
    def covered() -> str:
        return table("sales")

    @sensor()
    def watch() -> int:
        return int(os.environ.get("SENSOR_ONLY", "0"))

    @task()
    def send() -> None:
        print(os.environ.get("TASK_ONLY"))
"""

LINE = ("[barca] warning: 1 step reads environment variables not declared in env=: *_CSV, "
        "API_URL, DATA_DIR, THRESHOLD; barca status lists them")


def _warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "not declared in env=" in line]


def test_undeclared_reads_are_warned_once_listed_and_never_hashed(tmp_path: Path) -> None:
    write(tmp_path, {"barca.toml": "", "helpers.py": HELPERS, "pipeline.py": PIPELINE})
    env = {"DATA_DIR": "/data", "THRESHOLD": "5"}
    got = barca(tmp_path, "get", "report,covered", "pipeline.py", env=env).expect(0)
    assert _warning_lines(got.stderr) == [LINE]
    items = [(w["kind"], w["node"], w["param"]) for w in got.json["warnings"]]
    assert items == [("undeclared_env", "pipeline.py:report", name)
                     for name in ("*_CSV", "API_URL", "DATA_DIR", "THRESHOLD")]
    message = got.json["warnings"][2]["message"]
    assert message.startswith("pipeline.py:report reads environment variable DATA_DIR, which "
                              "its env= does not declare")
    assert got.steps["report"]["undeclared_env"] == ["*_CSV", "API_URL", "DATA_DIR",
                                                     "THRESHOLD"]
    assert "undeclared_env" not in got.steps["declared"]  # REGION declared, BARCA_ENV barca's
    assert "undeclared_env" not in got.steps["covered"]  # *_CSV covered by SALES_CSV

    # never hashed: another value reruns nothing (and is said again, once)
    again = barca(tmp_path, "get", "report,covered", "pipeline.py",
                  env={"DATA_DIR": "/elsewhere", "THRESHOLD": "6"}).expect(0)
    assert again.json["steps_executed"] == 0
    assert _warning_lines(again.stderr) == [LINE]

    status = barca(tmp_path, "status", "pipeline.py").expect(0).json
    nodes = {n["id"].split(":")[1]: n for n in status["nodes"]}
    assert nodes["report"]["undeclared_env"] == ["*_CSV", "API_URL", "DATA_DIR", "THRESHOLD"]
    # sensors and tasks run every time: what they read cannot leave a stale result
    assert not any("undeclared_env" in nodes[n] for n in ("declared", "covered", "watch", "send"))

    dry = barca(tmp_path, "get", "report", "pipeline.py", "--dry-run").expect(0)
    assert dry.steps["report"]["undeclared_env"] == ["*_CSV", "API_URL", "DATA_DIR", "THRESHOLD"]
    assert _warning_lines(dry.stderr) == [LINE]

    plan = barca(tmp_path, "plan", "pipeline.py").expect(0)
    assert _warning_lines(plan.stderr) == [LINE]
    assert [w["param"] for w in plan.json["warnings"] if w["kind"] == "undeclared_env"] == \
        ["*_CSV", "API_URL", "DATA_DIR", "THRESHOLD"]

    # declaring them all ends the warning
    declared = PIPELINE.replace('@asset(inputs={"declared": declared})',
                                '@asset(inputs={"declared": declared}, env=["DATA_DIR", '
                                '"THRESHOLD", "API_URL", "SALES_CSV"])')
    write(tmp_path, {"pipeline.py": declared})
    quiet = barca(tmp_path, "get", "report", "pipeline.py", env=env).expect(0)
    assert _warning_lines(quiet.stderr) == []
    assert not [w for w in quiet.json["warnings"] if w["kind"] == "undeclared_env"]


SETTINGS = """
    from pydantic_settings import BaseSettings, SettingsConfigDict
    from pydantic import Field
    from barca import asset

    class Settings(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="APP_")
        host: str = "localhost"
        token: str = Field("", validation_alias="SERVICE_TOKEN")

    @asset()
    def configured() -> str:
        return Settings.__name__
"""


def test_pydantic_settings_fields_count_as_reads_and_many_names_are_cut(tmp_path: Path
                                                                        ) -> None:
    many = "\n".join(f"        v{i} = os.environ.get('VAR_{i}')" for i in range(7))
    write(tmp_path, {"barca.toml": "", "pipeline.py": SETTINGS + """
    import os

    @asset()
    def many() -> int:
""" + many + "\n        return 1\n"})
    # nothing is imported to find them: the code is only read
    dry = barca(tmp_path, "plan", "pipeline.py").expect(0)
    assert _warning_lines(dry.stderr) == [
        "[barca] warning: 2 steps read environment variables not declared in env=: APP_HOST, "
        "SERVICE_TOKEN, VAR_0, VAR_1, VAR_2 (+4 more); barca status lists them"]


SCHEDULED = """
    import os
    from barca import Schedule, asset

    @asset(freshness=Schedule("*/1 * * * * *"))
    def ticking() -> str:
        return os.environ.get("TICK_SOURCE", "")
"""


def test_a_server_says_it_once_not_at_every_tick(tmp_path: Path, serve) -> None:
    write(tmp_path, {"barca.toml": "", "pipeline.py": SCHEDULED})
    server = serve(tmp_path, "pipeline.py")
    poll(lambda: sum(r["triggered_by"] == "schedule" and r["status"] == "success"
                     for r in server.runs()) >= 3 or None, "three scheduled ticks to succeed")
    assert _warning_lines(server.stderr) == [
        "[barca] warning: 1 step reads environment variables not declared in env=: "
        "TICK_SOURCE; barca status lists them"]
