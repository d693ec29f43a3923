"""How sure a percentile is, and stopping a load point once it is sure enough (`--target-moe`).

The interval is distribution-free: for the q-quantile of n samples, the number of samples at or below the true
quantile is Binomial(n, q), so the order statistics X(l) and X(u) with F(l-1) <= alpha/2 and F(u-1) >= 1 - alpha/2
(F the binomial CDF) bracket it with probability at least 1 - alpha, whatever the latency distribution. With too
few samples one side has no order statistic (a p99 of 50 requests has no upper bound): the interval is None, and
a precision stop never ends a point on it. The margin of error is the half-width over the estimate.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from evalkit.errors import UsageError
from evalkit.load.records import LoadLine, PrecisionJson
from evalkit.stats import percentile

LEVEL = 0.95


def quantile_ci(values: Sequence[float], q: float, level: float = LEVEL) -> tuple[float, float] | None:
    """The distribution-free `level` interval of the q-th percentile (q in 0..100), or None with too few samples."""
    n = len(values)
    if n == 0:
        return None
    from scipy.stats import binom

    p = q / 100.0
    alpha = 1.0 - level
    xs = sorted(values)
    # F(k) = P(Binomial(n, p) <= k); ranks are 1-based: X(l) <= quantile holds unless fewer than l samples are below.
    # l: the largest rank with F(l - 1) <= alpha/2; u: the smallest rank with F(u - 1) >= 1 - alpha/2.
    lo_k = int(binom.ppf(alpha / 2, n, p))  # smallest k with F(k) >= alpha/2
    if binom.cdf(lo_k, n, p) > alpha / 2:
        lo_k -= 1
    hi_k = int(binom.ppf(1 - alpha / 2, n, p))  # smallest k with F(k) >= 1 - alpha/2
    lo_rank, hi_rank = lo_k + 1, hi_k + 1
    if lo_rank < 1 or hi_rank > n:
        return None
    return xs[lo_rank - 1], xs[hi_rank - 1]


def warm() -> None:
    """Import scipy's binomial now: done lazily inside a running point it stalls the client for a second or more."""
    from scipy.stats import binom  # noqa: F401 - imported for its side effect (the module loaded)


def relative_moe(values: Sequence[float], q: float, level: float = LEVEL) -> float | None:
    """Half the interval's width over the percentile's estimate; None when there is no interval or the estimate is 0."""
    ci = quantile_ci(values, q, level)
    est = percentile(values, q)
    if ci is None or est is None or est == 0:
        return None
    return (ci[1] - ci[0]) / 2 / abs(est)


def intervals(quantiles: Sequence[int], values: Sequence[float], level: float = LEVEL) -> dict[str, list[float] | None]:
    """Each percentile's interval as [lo, hi] by its name (`p50` ...), or None where it has none: a distribution's
    `ci95`."""
    cis: dict[str, list[float] | None] = {}
    for q in quantiles:
        ci = quantile_ci(values, float(q), level)
        cis[f"p{q}"] = list(ci) if ci is not None else None
    return cis


# What a stop can watch: the per-request figures of a load line (ITL is one figure per gap, not per request).
_FIELDS = {"ttft": "ttft_s", "e2e": "e2e_s", "ttft_answer": "ttft_answer_s"}
_METRIC = re.compile(r"(ttft_answer|ttft|e2e)_p(\d{1,2})")


@dataclass(frozen=True)
class PrecisionStop:
    """End a point's measured phase when `metric`'s interval half-width is within `target` of its estimate."""

    target: float  # relative margin of error, 0.05 for 5%
    metric: str = "ttft_p95"
    min_requests: int = 30
    max_requests: int = 1000

    @property
    def field(self) -> str:
        """The request line's field the percentile is taken of."""
        return _FIELDS[_METRIC.fullmatch(self.metric).group(1)]  # type: ignore[union-attr]  # checked in parse

    @property
    def q(self) -> float:
        """The percentile watched."""
        return float(_METRIC.fullmatch(self.metric).group(2))  # type: ignore[union-attr]  # checked in parse

    def describe(self) -> str:
        """`5% on ttft_p95 (30..1000 requests)`."""
        return f"{self.target * 100:g}% on {self.metric} ({self.min_requests}..{self.max_requests} requests)"

    def moe(self, lines: Sequence[LoadLine]) -> float | None:
        """The current relative margin of error over the answered lines (errors and wrong answers left out)."""
        vals = [
            float(v)
            for r in lines
            if r.get("outcome") == "correct" and isinstance(v := r.get(self.field), (int, float))
        ]
        return relative_moe(vals, self.q)

    def reached(self, lines: Sequence[LoadLine]) -> bool:
        """True once at least `min_requests` answered and the margin is within the target."""
        if len(lines) < self.min_requests:
            return False
        m = self.moe(lines)
        return m is not None and m <= self.target

    def to_json(self) -> PrecisionJson:
        """The rule as the manifest and summary record it."""
        return {
            "target_moe": self.target,
            "metric": self.metric,
            "level": LEVEL,
            "min_requests": self.min_requests,
            "max_requests": self.max_requests,
        }


def parse_moe(text: str) -> float:
    """`5%` or `0.05` as a fraction."""
    t = text.strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        raise UsageError(f"--target-moe takes a percentage such as 5% (or 0.05), not {text!r}") from None
    if not (0 < v < 1) or not math.isfinite(v):
        raise UsageError(f"--target-moe must be above 0% and below 100%, not {text!r}")
    return v


def check_metric(text: str) -> str:
    """`ttft_p95`, `e2e_p50`, `ttft_answer_p90` ... (the percentile of a per-request figure)."""
    m = _METRIC.fullmatch(text.strip())
    if not m or not 1 <= int(m.group(2)) <= 99:
        raise UsageError(f"--moe-metric takes <ttft|ttft_answer|e2e>_p<1..99> such as ttft_p95, not {text!r}")
    return text.strip()
