"""One monotonic clock anchored once to epoch time, so every timestamp in a run is comparable."""

from __future__ import annotations

import asyncio
import os
import time

# Set by a process that starts another evalkit process it compares stamps with (the sim): "epoch,perf_counter".
ANCHOR_ENV = "EVALKIT_CLOCK_ANCHOR"


class Clock:
    """Epoch seconds read from `perf_counter`: never jumps with NTP, yet lines up with server epoch stamps."""

    def __init__(self) -> None:
        self._epoch0, self._mono0 = _anchor()

    @property
    def anchor(self) -> tuple[float, float]:
        """(epoch, perf_counter) read together at the start; another process on this host rebuilds the same clock."""
        return self._epoch0, self._mono0

    @classmethod
    def from_anchor(cls, anchor: tuple[float, float]) -> Clock:
        """The clock of `anchor` (client processes stamping on one clock: `perf_counter` is system-wide)."""
        clock = cls.__new__(cls)
        clock._epoch0, clock._mono0 = anchor
        return clock

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Clock:
        """The clock whose anchor `EVALKIT_CLOCK_ANCHOR` names (a parent's, so that both stamp on one clock to the
        nanosecond), else a fresh one."""
        text = (os.environ if environ is None else environ).get(ANCHOR_ENV, "")
        try:
            epoch, mono = (float(v) for v in text.split(","))
        except ValueError:
            return cls()
        return cls.from_anchor((epoch, mono))

    @property
    def anchor_text(self) -> str:
        """The anchor as `EVALKIT_CLOCK_ANCHOR` takes it."""
        return f"{self._epoch0!r},{self._mono0!r}"

    def now(self) -> float:
        """Current time as epoch seconds (float)."""
        return self._epoch0 + (time.perf_counter() - self._mono0)


def _anchor(tries: int = 50) -> tuple[float, float]:
    """An (epoch, perf_counter) pair read together: the epoch read bracketed by two counter reads, the tightest of a
    few tries kept. Two processes' clocks then agree to a few µs; a preemption between two bare reads (a loaded
    machine) would offset one process's stamps from another's (the sim's) by as long as the preemption lasted."""
    best = (float("inf"), 0.0, 0.0)
    for _ in range(tries):
        m0 = time.perf_counter()
        epoch = time.time()
        m1 = time.perf_counter()
        if m1 - m0 < best[0]:
            best = (m1 - m0, epoch, (m0 + m1) / 2)
            if best[0] < 2e-6:
                break
    return best[1], best[2]


async def sleep_until(clock: Clock, at: float, stop: asyncio.Event | None = None) -> None:
    """Return once `clock` reads `at` or later (or at once when `stop` is set).

    A loop's timer alone may wake early: uvloop truncates a delay to whole milliseconds and counts it from a loop time
    cached at the start of the iteration, so on a busy loop a timer fires before its time (measured: up to 1.5 ms on
    an idle machine, and a stress request sent more than 1 ms before its plan on a loaded one). Sleeping again for
    what is left makes "not before the plan" hold on any loop."""
    while stop is None or not stop.is_set():
        left = at - clock.now()
        if left <= 0:
            return
        if stop is None:
            await asyncio.sleep(left)
            continue
        try:
            await asyncio.wait_for(stop.wait(), timeout=left)
        except asyncio.TimeoutError:
            pass
