"""The search for the largest load that meets every target: double until a point fails, then bisect.

Loads are assumed to get worse as they grow (more streams or more requests a second never make latency better).
Concurrency is searched in whole streams, so the answer is exact to one stream; a rate to a relative
`resolution`. A start that already fails halves down (rates) or reports no passing load (concurrency 1).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

Measure = Callable[[float], Awaitable[bool]]


@dataclass
class SearchResult:
    """The largest passing load (None: none passed), the smallest failing one, and every step in order."""

    best: float | None
    first_failing: float | None
    bounded: bool  # False when the largest load allowed still passed (the true maximum may be higher)
    steps: list[tuple[float, bool]] = field(default_factory=list)


async def search_max(
    measure: Measure,
    start: float,
    max_load: float,
    integer: bool,
    resolution: float = 0.1,
    min_load: float | None = None,
) -> SearchResult:
    """Find the largest load in [min_load, max_load] for which `measure(load)` is True."""
    steps: list[tuple[float, bool]] = []
    seen: dict[float, bool] = {}

    async def probe(load: float) -> bool:
        if load not in seen:
            seen[load] = await measure(load)
            steps.append((load, seen[load]))
        return seen[load]

    floor = (1.0 if integer else start / 64) if min_load is None else min_load
    lo: float | None = None
    hi: float | None = None
    load = start
    if await probe(load):
        lo = load
        while lo < max_load:
            load = min(max_load, lo * 2)
            if await probe(load):
                lo = load
            else:
                hi = load
                break
        if hi is None:
            return SearchResult(lo, None, False, steps)
    else:
        hi = load
        while lo is None:
            load = _down(hi, integer)
            if load < floor:
                return SearchResult(None, hi, True, steps)
            if await probe(load):
                lo = load
            else:
                hi = load
    while not _close(lo, hi, integer, resolution):
        mid = float((int(lo) + int(hi)) // 2) if integer else (lo + hi) / 2
        if await probe(mid):
            lo = mid
        else:
            hi = mid
    return SearchResult(lo, hi, True, steps)


def _down(load: float, integer: bool) -> float:
    return float(int(load) // 2) if integer else load / 2


def _close(lo: float, hi: float, integer: bool, resolution: float) -> bool:
    return hi - lo <= 1 if integer else (hi - lo) <= resolution * lo
