"""The one rule that calls a before/after change "beyond noise", wherever a comparison is made (the report's marks,
the gate's relative rules, `--until-sure` against a baseline, sweeps, capability repeats).

A figure is compared on its raw samples (per run, per cycle or per request), never on a ratio of two headline
statistics: the test is the two-sided Mann-Whitney U (Wilcoxon rank-sum) test, exact for continuous samples at any
pair of sample counts, so identical builds are called different at most `level` of the time whatever the lengths
(4 cycles against 18 included) and whatever the figure's headline (a p95 or max is not resampled: at 4 to 18 samples
a percentile bootstrap of a tail ratio misses 2 to 3 times its nominal level). Rounds measured in alternation
(`compare_paired`) use the Wilcoxon signed-rank test on the per-round log ratios.

A call is made only when the rank test rejects at its level **and** the median moved by at least the noise floor;
where even total separation of the samples could not reach the level (too few samples a side) the answer is
"can't tell", with the count that would. Many figures of one run are one family (`holm`), and a run that looks
again after every cycle spends its level over the looks (`look_level`), so the chance of any false call over a
whole run stays at most the level. docs/until-sure.md and docs/bench-report-gate.md give the measured rates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

LEVEL = 0.05
NOISE_FLOOR = 0.02  # a change of the median smaller than this is never called, however sure
BETTER, WORSE, WITHIN, UNKNOWN = "▲", "▼", "≈", "?"
RANK = "rank"  # Mann-Whitney U on the samples
PAIRED = "signed-rank"  # Wilcoxon signed-rank on per-round log ratios
STRATIFIED = "stratified-rank"  # the sum of several strata's U statistics
_EXACT_CELLS = 40_000  # n_before * n_after up to which U's null distribution is computed exactly


@dataclass(frozen=True)
class Comparison:
    """One before/after comparison: the mark, the test and its p-value, the level the call was made at, the
    median ratio (after / before) and, for "can't tell", why."""

    mark: str
    method: str
    p: float | None
    level: float
    n_before: int
    n_after: int
    ratio: float | None
    detail: str
    why: str | None = None

    @property
    def beyond(self) -> bool:
        """True when the change is called beyond noise (either direction)."""
        return self.mark in (BETTER, WORSE)

    def at_level(self, level: float, floor: float = NOISE_FLOOR, higher_is_better: bool = True) -> Comparison:
        """The same test read at another level (a family's or a look's share), its mark made again."""
        return _mark(self.p, level, self.ratio, floor, higher_is_better, self)

    def to_json(self) -> dict[str, object]:
        """As a summary records it."""
        return {
            "mark": self.mark,
            "method": self.method,
            "p": self.p,
            "level": self.level,
            "n": [self.n_before, self.n_after],
            "ratio": self.ratio,
            "why": self.why,
        }


def _clean(xs: Sequence[float | None]) -> list[float]:
    return [float(x) for x in xs if isinstance(x, (int, float)) and math.isfinite(x)]


@lru_cache(maxsize=256)
def _u_null(m: int, n: int) -> tuple[float, ...]:
    """P(U = u) for u = 0 .. m*n under the null (no ties): the coefficients of the Gaussian binomial [m+n, m]_q,
    normalised."""
    c = np.zeros(m * n + 1)
    c[0] = 1.0
    # prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i): multiply by the numerator, then divide by the denominator (a running
    # sum along each residue class mod i).
    for i in range(1, m + 1):
        shifted = np.zeros_like(c)
        shifted[n + i :] = c[: len(c) - n - i]
        c = c - shifted
        for r in range(i):
            c[r::i] = np.cumsum(c[r::i])
    c = np.clip(c, 0.0, None)
    return tuple(c / c.sum())


def _u_statistic(before: Sequence[float], after: Sequence[float]) -> float:
    """U of `after`: the pairs (a, b) with a > b, ties counted one half."""
    b = np.asarray(before)
    a = np.asarray(after)
    return float((a[:, None] > b[None, :]).sum() + 0.5 * (a[:, None] == b[None, :]).sum())


def _normal_tail(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2))


def rank_p(before: Sequence[float], after: Sequence[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (exact null distribution up to `_EXACT_CELLS` pairs, normal with
    continuity correction beyond)."""
    m, n = len(after), len(before)
    u = _u_statistic(before, after)
    if m * n <= _EXACT_CELLS:
        dist = _u_null(m, n)
        lo = sum(dist[: math.floor(u) + 1])
        hi = sum(dist[math.ceil(u) :])
        return float(min(1.0, 2 * min(lo, hi)))
    mu = m * n / 2
    sd = math.sqrt(m * n * (m + n + 1) / 12)
    z = (abs(u - mu) - 0.5) / sd
    return float(min(1.0, 2 * _normal_tail(max(z, 0.0))))


def smallest_p(n_before: int, n_after: int) -> float:
    """The smallest two-sided p-value the rank test can give at these counts (every sample of one side beyond every
    sample of the other): 2 / C(n_before + n_after, n_before)."""
    if n_before == 0 or n_after == 0:
        return 1.0
    return min(1.0, 2 / math.comb(n_before + n_after, n_before))


def samples_needed(n_other: int, level: float) -> int | None:
    """The fewest samples a side needs, against `n_other` on the other, for the rank test to be able to reach
    `level`; None when more than 1,000 would be needed."""
    for k in range(1, 1001):
        if smallest_p(n_other, k) <= level:
            return k
    return None


def shift_interval(before: Sequence[float], after: Sequence[float], level: float = LEVEL) -> tuple[float, float] | None:
    """The distribution-free interval (Hodges-Lehmann, inverting the rank test) of the ratio after / before of two
    positive samples: order statistics of the pairwise log differences; None when the counts cannot give one at
    this level or a value is not positive."""
    if not before or not after or min(before) <= 0 or min(after) <= 0:
        return None
    m, n = len(after), len(before)
    diffs = np.sort(np.subtract.outer(np.log(after), np.log(before)).ravel())
    if m * n <= _EXACT_CELLS:
        cdf = np.cumsum(_u_null(m, n))
        k = int(np.searchsorted(cdf, level / 2, side="right"))  # P(U <= k - 1) <= level / 2
    else:
        z = NormalDist().inv_cdf(1 - level / 2)
        k = math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12))
    if k < 1:
        return None
    return float(math.exp(diffs[k - 1])), float(math.exp(diffs[len(diffs) - k]))


def _median(xs: Sequence[float]) -> float:
    return float(np.median(xs))


def _mark(
    p: float | None, level: float, ratio: float | None, floor: float, higher_is_better: bool, base: Comparison
) -> Comparison:
    if base.mark == UNKNOWN and p is None:
        return Comparison(**{**base.__dict__, "level": level})
    if p is not None and base.method == PAIRED and 2 / 2**base.n_before > level:
        rounds = next((k for k in range(1, 64) if 2 / 2**k <= level), None)
        why = f"{base.n_before} paired round(s): a signed-rank test needs {rounds} to reach the {level:.3g} level"
        return Comparison(UNKNOWN, base.method, p, level, base.n_before, base.n_after, ratio, base.detail, why)
    if p is not None and smallest_p(base.n_before, base.n_after) > level and base.method == RANK:
        need = samples_needed(base.n_before, level)
        why = (
            f"{base.n_before} and {base.n_after} samples: a rank test cannot reach the {level:.3g} level with "
            f"{base.n_after}" + (f" (needs {need} against {base.n_before})" if need else "")
        )
        return Comparison(UNKNOWN, base.method, p, level, base.n_before, base.n_after, ratio, base.detail, why)
    called = p is not None and p <= level and ratio is not None and abs(ratio - 1) >= floor
    if not called:
        return Comparison(WITHIN, base.method, p, level, base.n_before, base.n_after, ratio, base.detail)
    up = ratio is not None and ratio > 1
    mark = BETTER if up == higher_is_better else WORSE
    return Comparison(mark, base.method, p, level, base.n_before, base.n_after, ratio, base.detail)


def compare_samples(
    before: Sequence[float | None],
    after: Sequence[float | None],
    higher_is_better: bool,
    level: float = LEVEL,
    noise_floor: float = NOISE_FLOOR,
) -> Comparison:
    """Whether `after` moved beyond noise from `before`: the rank test at `level` and a median change of at least
    `noise_floor`. "can't tell" (`?`) when a side has no sample or the counts cannot reach the level."""
    xb, xa = _clean(before), _clean(after)
    nb, na = len(xb), len(xa)
    if nb == 0 or na == 0:
        why = f"{nb} and {na} samples"
        return Comparison(UNKNOWN, RANK, None, level, nb, na, None, why, why)
    mb, ma = _median(xb), _median(xa)
    ratio = ma / mb if mb else None
    p = rank_p(xb, xa)
    detail = f"Mann-Whitney p={p:.3g} at level {level:.3g}, n={nb}/{na}"
    base = Comparison(UNKNOWN, RANK, p, level, nb, na, ratio, detail)
    return _mark(p, level, ratio, noise_floor, higher_is_better, base)


def compare_paired(
    before: Sequence[float | None],
    after: Sequence[float | None],
    higher_is_better: bool,
    level: float = LEVEL,
    noise_floor: float = NOISE_FLOOR,
) -> Comparison:
    """Rounds measured in alternation (round i's before and after taken back to back): the Wilcoxon signed-rank
    test on the per-round log ratios, the median ratio as the change. "can't tell" below the rounds that can reach
    the level (6 at 0.05)."""
    pairs = [(b, a) for b, a in zip(before, after) if b is not None and a is not None and b > 0 and a > 0]
    n = len(pairs)
    logs = [math.log(a / b) for b, a in pairs]
    ratio = math.exp(_median(logs)) if logs else None
    reach = 2 / 2**n if n else 1.0
    if n == 0 or reach > level:
        need = next(k for k in range(1, 64) if 2 / 2**k <= level)
        why = f"{n} paired round(s): a signed-rank test needs {need} to reach the {level:.3g} level"
        return Comparison(UNKNOWN, PAIRED, None, level, n, n, ratio, why, why)
    from scipy.stats import wilcoxon

    nonzero = [x for x in logs if x != 0]
    p = 1.0 if not nonzero else float(wilcoxon(nonzero, alternative="two-sided").pvalue)
    detail = f"signed-rank p={p:.3g} at level {level:.3g}, {n} paired rounds"
    base = Comparison(UNKNOWN, PAIRED, p, level, n, n, ratio, detail)
    return _mark(p, level, ratio, noise_floor, higher_is_better, base)


def holm_levels(pvalues: Sequence[float | None], level: float = LEVEL) -> list[float]:
    """Holm's step-down levels for a family of tests: the i-th smallest p-value is tested at level / (m - i + 1)
    while every smaller one rejected; a test after the first that does not reject is held at the level that stopped
    the walk (so it does not reject either). None p-values take no share."""
    m = sum(p is not None for p in pvalues)
    order = sorted((i for i, p in enumerate(pvalues) if p is not None), key=lambda i: pvalues[i])  # type: ignore[arg-type,return-value]
    out = [level] * len(pvalues)
    stopped: float | None = None
    for rank, i in enumerate(order):
        share = level / (m - rank)
        if stopped is None and (pvalues[i] or 0.0) > share:
            stopped = share
        out[i] = share if stopped is None else stopped
    return out


def holm(
    comparisons: Sequence[Comparison],
    higher_is_better: Sequence[bool],
    level: float = LEVEL,
    noise_floor: float = NOISE_FLOOR,
) -> list[Comparison]:
    """A family of comparisons made together (one run's figures): each read again at its Holm level, so the chance
    of any false call in the family is at most `level`."""
    levels = holm_levels([c.p for c in comparisons], level)
    return [c.at_level(lv, noise_floor, h) for c, lv, h in zip(comparisons, levels, higher_is_better)]


def spent(level: float, fraction: float, power: float = 3.0) -> float:
    """The level spent by `fraction` (0..1) of a sequential run's information: level x fraction^power (Hwang-Shih-
    DeCani's power family; 3 spends little at the early looks, like O'Brien-Fleming)."""
    return float(level * min(1.0, max(0.0, fraction)) ** power)


def look_level(level: float, look: int, max_looks: int, first_look: int = 1, power: float = 3.0) -> float:
    """The share of `level` that look `look` (a cycle count, first_look .. max_looks) may spend: what the spending
    function gives at this look less what it gave at the one before. The shares of all looks add up to at most
    `level`, so a run that tests at every look calls an identical build changed at most `level` of the time (a union
    bound: no assumption on how the looks depend on each other)."""
    if look < first_look:
        return 0.0
    prev = spent(level, (look - 1) / max_looks, power) if look > first_look else 0.0
    return max(0.0, spent(level, look / max_looks, power) - prev)


def compare_stratified(
    strata: Sequence[tuple[Sequence[float | None], Sequence[float | None]]],
    higher_is_better: bool,
    level: float = LEVEL,
    noise_floor: float = NOISE_FLOOR,
) -> Comparison:
    """One question asked of several strata at once (decode speed over the code, math and prose prompts): the
    stratified rank test, the sum of each stratum's U against the exact convolution of their null distributions, so
    3 runs a side in each of 3 prompts can reach a level that 3 against 3 alone cannot (0.00025 at best, against
    0.1). The change is the median of the strata's median ratios; the floor applies to it."""
    kept = [(_clean(b), _clean(a)) for b, a in strata]
    kept = [(b, a) for b, a in kept if b and a]
    nb, na = sum(len(b) for b, _ in kept), sum(len(a) for _, a in kept)
    if not kept:
        why = "no stratum with samples on both sides"
        return Comparison(UNKNOWN, STRATIFIED, None, level, nb, na, None, why, why)
    dist = np.array([1.0])
    total = 0.0
    for b, a in kept:
        one = np.zeros(2 * len(a) * len(b) + 1)
        one[::2] = _u_null(len(a), len(b))  # on the half-integer grid (ties count one half)
        dist = np.convolve(dist, one)
        total += _u_statistic(b, a)
    t = round(2 * total)
    p = float(min(1.0, 2 * min(dist[: t + 1].sum(), dist[t:].sum())))
    reach = float(min(1.0, 2 * math.prod(_u_null(len(a), len(b))[0] for b, a in kept)))
    ratios = [_median(a) / _median(b) for b, a in kept if _median(b)]
    ratio = float(np.median(ratios)) if ratios else None
    detail = f"stratified rank test p={p:.3g} at level {level:.3g} over {len(kept)} strata, n={nb}/{na}"
    if reach > level:
        why = f"{len(kept)} strata of {nb} and {na} samples cannot reach the {level:.3g} level"
        return Comparison(UNKNOWN, STRATIFIED, p, level, nb, na, ratio, detail, why)
    return _mark(
        p, level, ratio, noise_floor, higher_is_better, Comparison(UNKNOWN, STRATIFIED, p, level, nb, na, ratio, detail)
    )
