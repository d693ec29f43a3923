"""One monotonic clock anchored once to epoch time, so every timestamp in a run is comparable."""

from __future__ import annotations

import time


class Clock:
    """Epoch seconds read from `perf_counter`: never jumps with NTP, yet lines up with server epoch stamps."""

    def __init__(self) -> None:
        self._epoch0 = time.time()
        self._mono0 = time.perf_counter()

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
