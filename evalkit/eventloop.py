"""Which asyncio event loop evalkit's commands run on: uvloop where it is installed, the standard one otherwise; and
stopping the background tasks that sample alongside a run (GPU memory, event-loop lag)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def fast_loop(enabled: bool = True) -> Iterator[str]:
    """Within the block, `asyncio.run` makes uvloop loops (unless `EVALKIT_LOOP=asyncio`); yields the loop's name.

    The client reads every chunk on the loop, and uvloop's socket reads cost about half of the standard loop's CPU.
    The previous loop policy is put back afterwards, so a command run in-process (tests) leaves no trace."""
    name = "asyncio"
    uvloop: Any = None  # the module, where it is installed and wanted
    if (
        enabled
        and os.environ.get("EVALKIT_LOOP", "").lower() != "asyncio"
        and sys.platform != "win32"
        and sys.version_info < (3, 14)
    ):  # loop policies are deprecated from 3.14 on
        try:
            import uvloop
        except ImportError:
            uvloop = None
    if uvloop is None:
        yield name
        return
    previous = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    try:
        yield "uvloop"
    finally:
        asyncio.set_event_loop_policy(previous)


def loop_name() -> str:
    """The running loop's kind ("uvloop" or "asyncio"), for manifests and benchmark lines."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


async def stop_task(task: asyncio.Task[None] | None) -> None:
    """Cancel a background task and wait until it has stopped."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
