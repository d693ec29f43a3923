"""Which asyncio event loop evalkit's commands run on: uvloop where it is installed, the standard one otherwise; and
stopping the background tasks that sample alongside a run (GPU memory, event-loop lag)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import sys
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def fast_loop(enabled: bool = True) -> Iterator[str]:
    """Within the block, `asyncio.run` makes uvloop loops (unless `EVALKIT_LOOP=asyncio`); yields the loop's name.

    The client reads every chunk on the loop, and uvloop's socket reads cost about half of the standard loop's CPU.
    The collector makes no pauses inside the block (`no_gc_pauses`); `enabled=False` (the sim, a server left
    running) keeps it collecting, only less often (`calm_gc`). The previous loop policy and collector settings are
    put back afterwards, so a command run in-process (tests) leaves no trace."""
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
    with no_gc_pauses() if enabled else calm_gc():
        if uvloop is None:
            yield name
            return
        previous = asyncio.get_event_loop_policy()
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
        try:
            yield "uvloop"
        finally:
            asyncio.set_event_loop_policy(previous)


# The young generation's allocation count between collections while a run streams (CPython's default is 700).
GC_YOUNG_THRESHOLD = 50_000


@contextlib.contextmanager
def calm_gc() -> Iterator[None]:
    """Within the block, what exists already (modules, settings, the dataset) is left out of garbage collection
    (`gc.freeze`) and the young generation is collected every `GC_YOUNG_THRESHOLD` allocations, not every 700.

    A streaming client allocates a few tracked objects a chunk, so with the defaults the collector ran every few
    hundred chunks and walked the whole heap every few thousand (5 % of a 512-stream client's samples in py-spy).
    Both are put back afterwards; a block inside another leaves the outer one's settings alone."""
    before = gc.get_threshold()
    if not gc.isenabled() or before[0] >= GC_YOUNG_THRESHOLD:
        yield
        return
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, before[1], before[2])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


@contextlib.contextmanager
def no_gc_pauses() -> Iterator[None]:
    """Within the block the cyclic garbage collector does not run: what exists is frozen on entry (no walk), automatic
    collection is off, and both are put back on exit (the next collection then takes what cycles the block left).
    Reference counting frees everything else at once, as always.

    A collection walks every live object of the generations it takes, all at once, with the loop stopped. With the
    young threshold at 50,000 (`calm_gc`) a 200 requests/s trace replay (2,000 requests) had two young collections
    of 24-57 ms and a full one of 6-10 ms on a loaded 2-core box (1.5-8 ms middle ones with CPython's defaults).
    On quiet cores the replay's few late sends were no fewer without them (benchmarks/results/
    trace-replay-gc-h200-2026-12-02.txt): those have another cause. The same replay left 515 unreachable objects in
    all (about one for every four requests), so a run of a million requests keeps a few hundred thousand small
    objects at most.
    Leaves a collector that is already off (a nested block, a caller's choice) alone."""
    if not gc.isenabled():
        yield
        return
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


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
