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


def headline(values: Sequence[float], stat: str) -> float | None:
    """A distribution's named statistic: `p50`, `p95`, any `pNN`, `max` or `min`; None when empty."""
    if not values:
        return None
    if stat == "max":
        return max(values)
    if stat == "min":
        return min(values)
    if stat.startswith("p") and stat[1:].isdigit():
        return percentile(values, float(stat[1:]))
    raise ValueError(f"unknown statistic {stat!r}")


def bootstrap_ci(
    values: Sequence[float], stat: str, n_resamples: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of `stat` (`headline`) over `values`; seeded, so a run decides the same way
    when read twice. None for fewer than two values (one value has no spread to resample)."""
    import random

    if len(values) < 2:
        return None
    rng = random.Random(seed)
    got = [headline([rng.choice(values) for _ in values], stat) for _ in range(n_resamples)]
    lo = percentile(got, 100 * (1 - level) / 2)
    hi = percentile(got, 100 * (1 + level) / 2)
    assert lo is not None and hi is not None  # n_resamples values
    return lo, hi


def bootstrap_ratio_ci(
    num: Sequence[float],
    den: Sequence[float],
    stat: str = "p50",
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile-bootstrap interval of stat(num) / stat(den), each side resampled on its own; None for fewer than
    two values a side or a zero denominator."""
    import random

    if len(num) < 2 or len(den) < 2:
        return None
    rng = random.Random(seed)
    got = []
    for _ in range(n_resamples):
        a = headline([rng.choice(num) for _ in num], stat)
        b = headline([rng.choice(den) for _ in den], stat)
        if a is None or not b:
            return None
        got.append(a / b)
    lo = percentile(got, 100 * (1 - level) / 2)
    hi = percentile(got, 100 * (1 + level) / 2)
    assert lo is not None and hi is not None
    return lo, hi


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of k successes in n; (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (centre - spread) / (1 + z2 / n), (centre + spread) / (1 + z2 / n)


def median_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval of the median: the order statistics x(j) and x(n+1-j) with the largest j whose
    binomial tail P(Bin(n, 1/2) < j) is at most (1 - level) / 2, so it holds the true median at least `level` of the
    time for any continuous distribution. None when no such interval exists (fewer than 6 values at 95%)."""
    xs = sorted(values)
    n = len(xs)
    tail = (1 - level) / 2
    j, below = 0, 0.0  # below: P(Bin(n, 1/2) < j + 1)
    while j + 1 <= n // 2:
        below += math.comb(n, j) / 2**n
        if below > tail:
            break
        j += 1
    if j == 0:
        return None
    return xs[j - 1], xs[n - j]


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (right only before, right only after)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    # Exact McNemar is a two-sided binomial test of the discordant pairs against p = 1/2.
    from scipy.stats import binomtest

    return float(binomtest(only_a, n, 0.5, alternative="two-sided").pvalue)


def clopper_pearson_interval(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of k successes in n: it holds the true share at least `level` of the time
    for every true share, where the Wilson interval dips below (to 93-94% at some shares); it is also conservative
    for a sum of unequal Bernoulli trials (Hoeffding 1956: their tails are no heavier than the binomial's at the
    mean). (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    from scipy.stats import beta

    tail = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(tail, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - tail, k + 1, n - k))
    return lo, hi
