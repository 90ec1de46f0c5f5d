"""Where a project lives: its root (`barca.toml` or the cwd), its environment, its settings
(`barca.config`) and `.barca/` paths.

Only paths and configuration; nothing here reads the metadata database or user code.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from barca.config import NO_SETTINGS, Settings, read_settings
from barca.errors import InfraError, UsageError
from barca.project_root import find_root

ENV_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Project:
    root: Path
    env: str
    settings: Settings = NO_SETTINGS  # what barca.toml sets

    @property
    def state_dir(self) -> Path:
        """`.barca/` for the default environment, `.barca/envs/<env>/` for the others."""
        base = self.root / ".barca"
        return base if self.env == "default" else base / "envs" / self.env

    @property
    def db_path(self) -> Path:
        return self.state_dir / "metadata.db"

    @property
    def artifacts_dir(self) -> Path:
        return self.state_dir / "artifacts"

    def state_blocker(self) -> Path | None:
        """The first path on the way to `state_dir` (`.barca`, `.barca/envs`, ...) that is
        there but is not a directory (a file, a dangling link): the state can then be neither
        read nor created. None when there is none."""
        path = self.root
        for part in self.state_dir.relative_to(self.root).parts:
            path = path / part
            if os.path.lexists(path) and not path.is_dir():
                return path
        return None

    def ensure_state_dir(self) -> None:
        """Create `.barca/` with its `.gitignore` on first write."""
        base = self.root / ".barca"
        if not base.exists():
            base.mkdir(parents=True, exist_ok=True)
        ignore = base / ".gitignore"
        if not ignore.exists():
            ignore.write_text("*\n")
        self.artifacts_dir.mkdir(parents=True, exist_ok=True)


def resolve_env(flag: str | None) -> str:
    """`--env` beats `BARCA_ENV`; the default environment is `default`."""
    name = flag if flag is not None else os.environ.get("BARCA_ENV") or "default"
    if not ENV_NAME.match(name):
        raise UsageError(
            f"invalid environment name {name!r}",
            "use letters, digits, '.', '_' or '-' (at most 64 characters), e.g. --env staging",
        )
    return name


def open_project(env_flag: str | None = None, cwd: Path | None = None,
                 read_config: bool = True, check_state: bool = True) -> Project:
    """The project at or above `cwd`; its barca.toml is checked unless `read_config` is False,
    and its `.barca/` is checked to be a directory or absent unless `check_state` is False
    (`barca doctor` reports either as a failed check instead)."""
    root = find_root(cwd or Path.cwd())
    env = resolve_env(env_flag)
    project = Project(root, env, read_settings(root) if read_config else NO_SETTINGS)
    if check_state:
        _refuse_blocked_state(project)
    return project


def _refuse_blocked_state(project: Project) -> None:
    """Exit 3 before anything reads or writes the state when its directory cannot be one: a
    read would find nothing (an empty history shown as if true) and a run would fail midway."""
    blocker = project.state_blocker()
    if blocker is not None:
        where = project.state_dir.relative_to(project.root)
        raise InfraError(f"{blocker} is not a directory; barca keeps this project's state "
                         f"(results, run history) in {where}/",
                         f"move {blocker} out of the way (barca creates {blocker.name}/ on the "
                         "next run)", path=str(blocker))
