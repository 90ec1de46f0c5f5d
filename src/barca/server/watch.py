"""`--watch`: reload the pipeline when a source file changes (watchfiles), so that a fixed
load error clears and an edited schedule takes effect without a restart. Runs always read
the current sources anyway: each is a fresh command."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Awaitable, Callable


async def watch(root: Path, reload: Callable[[], Awaitable[None]],
                stop: asyncio.Event) -> None:
    from watchfiles import awatch

    def python_source(change, path: str) -> bool:
        return path.endswith(".py") and "/.barca/" not in path and "/__pycache__/" not in path

    async for _ in awatch(root, watch_filter=python_source, stop_event=stop, debounce=200):
        await reload()
