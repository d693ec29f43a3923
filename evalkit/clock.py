"""One monotonic clock anchored once to epoch time, so every timestamp in a run is comparable."""

from __future__ import annotations

import time


class Clock:
    """Epoch seconds read from `perf_counter`: never jumps with NTP, yet lines up with server epoch stamps."""

    def __init__(self) -> None:
        self._epoch0 = time.time()
        self._mono0 = time.perf_counter()

    def now(self) -> float:
        """Current time as epoch seconds (float)."""
        return self._epoch0 + (time.perf_counter() - self._mono0)
