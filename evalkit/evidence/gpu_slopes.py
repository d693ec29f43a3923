"""The slopes a GPU memory verdict weighs, each with its own noise: memory against run time (MiB per second),
against the requests finished so far (MiB per request), and each cycle's peak against the cycle (MiB per cycle).

A leak grows with whatever allocates without freeing: time (a cache that never evicts), requests (the write-up's
pointer table, allocated every step), or cycles. Each slope is an ordinary least-squares fit with a Student-t
interval, but the samples behind the first two are not independent evidence: sampled every fraction of a second,
memory that rises and falls with the requests in flight (or steps once per request) leaves residuals that follow
each other, and the textbook standard error then claims far more precision than the run holds. So those two
standard errors are widened by the lag-1 autocorrelation of their residuals (the effective number of independent
samples is n(1-r)/(1+r), as in Santer et al. 2000, J. Geophys. Res. 105:7337), with that many degrees of freedom.
The per-cycle slope has one point a cycle, a cycle apart: few points, but independent ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Two-sided: noise alone puts a slope past its bound on one side 0.01% of the time. At 99.8% a flat card with
# ±50 MiB of sampling noise was named in 7 of 5,000 synthetic runs (three slopes a card); at 99.98%, in none.
CONFIDENCE = 0.9998
# nvidia-smi reads whole MiB and allocators grow in 2 MiB pages: a slope that adds less than this over the run has
# not shown a leak, however straight the line.
MIN_GROWTH_MIB = 8.0
UNITS = ("second", "request", "cycle")
# The variance of rounding to whole MiB (uniform over one MiB): the least scatter any fit is granted.
READING_VARIANCE_MIB2 = 1 / 12


@dataclass(frozen=True)
class Slope:
    """One fitted slope: MiB per `per`, its noise (the CONFIDENCE half-width), and what it rests on."""

    per: str
    slope: float | None
    noise: float | None  # None: nothing to judge it by (too few points, or too few independent ones)
    points: int
    independent: float | None  # effective number of independent points (autocorrelation-corrected)
    span: float  # the x range fitted over: seconds, requests or cycles
    r2: float | None
    samples_r2: float | None = None  # how well this form fits the samples (see `samples_r2`), to rank the forms

    @property
    def growth(self) -> float | None:
        """The growth over the run that the slope implies (MiB)."""
        return None if self.slope is None else self.slope * self.span

    @property
    def call(self) -> str:
        """`up` / `down` when the interval excludes zero and the growth passes the floor, `within_noise`, or
        `unjudged`."""
        if self.slope is None or self.noise is None:
            return "unjudged"
        growth = self.growth or 0.0
        if self.slope - self.noise > 0 and growth >= MIN_GROWTH_MIB:
            return "up"
        if self.slope + self.noise < 0 and -growth >= MIN_GROWTH_MIB:
            return "down"
        return "within_noise"

    @property
    def upper_growth(self) -> float | None:
        """The most growth over the run that the interval allows (MiB)."""
        if self.slope is None or self.noise is None:
            return None
        return max(0.0, (self.slope + self.noise) * self.span)


def fit_slope(per: str, xs: Sequence[float], ys: Sequence[float], autocorrelated: bool) -> Slope:
    """Least-squares slope of ys on xs with its CONFIDENCE half-width; `autocorrelated` widens it by the lag-1
    autocorrelation of the residuals taken in the given order (the samples' time order)."""
    n = len(xs)
    span = (max(xs) - min(xs)) if n else 0.0
    if n < 2 or span <= 0:
        return Slope(per, None, None, n, None, span, None)
    from scipy.stats import linregress
    from scipy.stats import t as student_t

    fit = linregress(xs, ys)
    slope = float(fit.slope)
    r2 = float(fit.rvalue) ** 2 if math.isfinite(fit.rvalue) else 1.0  # a flat line: rvalue is nan
    if n < 3:
        return Slope(per, slope, None, n, None, span, r2)
    resid = [y - fit.intercept - slope * x for x, y in zip(xs, ys)]
    ss = sum(e * e for e in resid)
    mx = sum(xs) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    # No fit is known better than the readings' rounding: three whole-MiB peaks on a line by chance are not a
    # line without scatter.
    se = math.sqrt(max(ss / (n - 2), READING_VARIANCE_MIB2) / sxx)
    n_eff = float(n)
    if autocorrelated and ss > 0:
        rho = sum(a * b for a, b in zip(resid, resid[1:])) / ss
        rho = min(max(rho, 0.0), 0.999)  # negative autocorrelation would narrow the interval: never trusted
        n_eff = n * (1 - rho) / (1 + rho)
        if n_eff < 3:
            return Slope(per, slope, None, n, n_eff, span, r2)
        se *= math.sqrt((n - 2) / (n_eff - 2))
    noise = float(student_t.ppf(0.5 + CONFIDENCE / 2, n_eff - 2)) * se
    return Slope(per, slope, noise, n, n_eff, span, r2)


def samples_r2(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """R² of a straight line of ys on xs: how much of the samples' scatter a form of growth explains. The three
    forms are fitted to the same samples (the cycle form against each sample's cycle), so their R² compare."""
    if len(xs) < 3 or max(xs) == min(xs):
        return None
    if max(ys) == min(ys):
        return 1.0
    from scipy.stats import linregress

    return float(linregress(xs, ys).rvalue) ** 2
