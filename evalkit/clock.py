"""One monotonic clock anchored once to epoch time, so every timestamp in a run is comparable."""

from __future__ import annotations

import time


class Clock:
    """Epoch seconds read from `perf_counter`: never jumps with NTP, yet lines up with server epoch stamps."""

    def __init__(self) -> None:
        self._epoch0, self._mono0 = _anchor()

    @property
    def anchor(self) -> tuple[float, float]:
        """(epoch, perf_counter) read together at the start; another process on this host rebuilds the same clock."""
        return self._epoch0, self._mono0

    @classmethod
    def from_anchor(cls, anchor: tuple[float, float]) -> "Clock":
        """The clock of `anchor` (client processes stamping on one clock: `perf_counter` is system-wide)."""
        clock = cls.__new__(cls)
        clock._epoch0, clock._mono0 = anchor
        return clock

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
