"""Which `barca serve` this machine is configured to use (BARCA_SERVER over `[server] url` in
the project's barca.toml): the one answer the CLI (`cli.server_option`, and `cli.main`
before a quick kept answer or the warm pool), the Python API and `server_client` go by. It
is asked before every `barca get`, so it imports nothing at its top, and parses barca.toml
only when its bytes may hold a `[server]` table.
"""

from __future__ import annotations

import os


class Configured:
    """The configured server: its URL and where it was set (BARCA_SERVER or [server] url)."""

    __slots__ = ("url", "source")

    def __init__(self, url: str, source: str) -> None:
        self.url, self.source = url, source


def configured_server() -> Configured | None:
    """The server this machine is configured to use: BARCA_SERVER (empty: unset) over
    `[server] url` of the project here; None for none."""
    url = os.environ.get("BARCA_SERVER", "").strip() or None
    if url is not None:
        if "://" not in url:
            from barca.errors import UsageError

            raise UsageError(f"BARCA_SERVER={url!r} is not a URL",
                             "set it like BARCA_SERVER=http://127.0.0.1:8274, or unset it")
        return Configured(url, "BARCA_SERVER")
    if not _may_name_a_server():
        return None
    url = project_settings().server_url
    return None if url is None else Configured(url, "[server] url")


def _may_name_a_server() -> bool:
    """Whether the project's barca.toml may hold a `[server]` table: a look at its bytes,
    so that a project without one parses no TOML here (a quick `get` asks, cli.main)."""
    from barca.project_root import root_of

    try:
        with open(os.path.join(root_of(os.getcwd()), "barca.toml"), "rb") as fh:
            return b"server" in fh.read()
    except FileNotFoundError:
        return False
    except OSError:
        return True  # unreadable: the settings' reader says why


def project_settings():
    """barca.toml's settings of the project the working directory is in."""
    from pathlib import Path

    from barca.config import read_settings
    from barca.project_root import root_of

    return read_settings(Path(root_of(os.getcwd())))
