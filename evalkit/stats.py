"""Summary statistics computed from raw samples at the end of a run (never from running averages)."""

from __future__ import annotations

import math
from typing import Iterable


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between closest ranks; None when empty."""
    xs = sorted(v for v in values if v is not None and not math.isnan(v))
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def distribution(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """`{"p50", "p95", "max", "n"}` of a sample, the shape every latency metric takes in `summary.json`."""
    xs = [v for v in values if v is not None]
    return {
        "p50": percentile(xs, 50),
        "p95": percentile(xs, 95),
        "max": max(xs) if xs else None,
        "n": len(xs),
    }
