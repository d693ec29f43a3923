"""A planned send or cancel never goes out before its time on evalkit's clock, whichever event loop runs it.

A loaded suite run saw a stress request's send stamp more than 1 ms before its plan: uvloop truncates a timer's
delay to whole milliseconds and counts it from a loop time cached at the start of the iteration, so its timers wake
early (on an idle machine too: about half of 200 sleeps of 1.9-2.8 ms woke up to 1.5 ms early).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from evalkit.clock import Clock, sleep_until

uvloop = pytest.importorskip("uvloop")
LOOPS: dict[str, Callable[[Coroutine[Any, Any, Any]], Any]] = {"asyncio": asyncio.run, "uvloop": uvloop.run}


async def _early_by(sleeps: int, stop: asyncio.Event | None = None) -> list[float]:
    clock, early = Clock(), []
    for i in range(sleeps):
        at = clock.now() + 0.0019 + (i % 10) * 0.0001  # delays that whole milliseconds cut short
        await sleep_until(clock, at, stop)
        early.append(at - clock.now())
    return early


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("with_stop", [False, True], ids=["sleep", "stop-event"])
def test_never_wakes_before_its_time(loop: str, with_stop: bool) -> None:
    async def main() -> list[float]:
        return await _early_by(200, asyncio.Event() if with_stop else None)

    early = LOOPS[loop](main())
    woke_early = [e for e in early if e > 0]
    assert not woke_early, f"{len(woke_early)} of {len(early)} woke early, by up to {max(early) * 1e3:.3f} ms"


@pytest.mark.parametrize("loop", LOOPS)
def test_a_set_stop_returns_at_once(loop: str) -> None:
    async def main() -> float:
        clock, stop = Clock(), asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, stop.set)
        t0 = clock.now()
        await sleep_until(clock, t0 + 30.0, stop)
        return clock.now() - t0

    took = LOOPS[loop](main())
    assert 0.04 <= took < 5.0, took  # generous: a busy machine may run the callback late
