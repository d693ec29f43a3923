"""Summary statistics computed from raw samples at the end of a run (never from running averages): the one home of
percentiles, medians and the `{"p50", "p95", "max", "n"}` distributions in `summary.json`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def percentile(values: Iterable[float | None], q: float) -> float | None:
    """The q-th percentile (0-100) with linear interpolation between closest ranks; None when empty. Missing values
    (None, NaN) are left out."""
    xs = sorted(v for v in values if v is not None and not math.isnan(v))
    if not xs:
        return None
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def median(values: Iterable[float | None]) -> float | None:
    """The 50th percentile of the values given (None, NaN and anything not a number left out); None when none is."""
    return percentile((v for v in values if isinstance(v, (int, float))), 50)


def distribution(values: Iterable[float | None], quantiles: Sequence[int] = (50, 95)) -> dict[str, float | int | None]:
    """`{"p50", "p95", "max", "n"}` of a sample (None left out), the shape every latency metric takes in
    `summary.json`; `quantiles` names other percentiles (load: 50, 90, 95, 99)."""
    xs = [v for v in values if v is not None]
    out: dict[str, float | int | None] = {f"p{q}": percentile(xs, q) for q in quantiles}
    out["max"] = max(xs) if xs else None
    out["n"] = len(xs)
    return out


def union_length(spans: Iterable[tuple[float, float]]) -> float:
    """The total length covered by the intervals (lo, hi): overlaps counted once."""
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(spans):
        total += max(0.0, hi - max(lo, end))
        end = max(end, hi)
    return total
