"""Background tasks that sample alongside a stress run (GPU memory, event-loop lag), stopped with the run."""

from __future__ import annotations

import asyncio


async def stop_task(task: asyncio.Task[None] | None) -> None:
    """Cancel a background task and wait until it has stopped."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
