"""Is a before/after change beyond noise? McNemar's exact test for paired answers, bootstrap CIs for rates.

Marks: `▲` beyond noise and better, `▼` beyond noise and worse, `≈` within noise, `?` too few samples to tell.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from evalkit.runs.summary_parts import Distribution
from evalkit.stats import median, percentile

BETTER, WORSE, WITHIN, UNKNOWN = "▲", "▼", "≈", "?"
ALPHA = 0.05
# Fewer samples than this per side and the bootstrap cannot tell a change from luck.
MIN_BOOTSTRAP_SAMPLES = 3
# Client-timed rates of one build wander by about a percent from run to run (clocks, other load); a change
# smaller than this is never called real, however tight its interval.
DEFAULT_NOISE_FLOOR = 0.02


@dataclass(frozen=True)
class NoiseVerdict:
    """The mark for one change and how it was decided."""

    mark: str
    method: str
    detail: str

    @property
    def beyond(self) -> bool:
        """True when the change is beyond noise (either direction)."""
        return self.mark in (BETTER, WORSE)


def bootstrap_diff_ci(
    before: Sequence[float], after: Sequence[float], n_resamples: int = 2000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of median(after) - median(before); seeded so a report renders the same twice."""
    rng = random.Random(seed)
    diffs = []
    for _ in range(n_resamples):
        a = [rng.choice(before) for _ in before]
        b = [rng.choice(after) for _ in after]
        # a and b are resamples of samples_verdict's numbers (>= 3 a side): a median each unless all are NaN
        diffs.append(cast(float, median(b)) - cast(float, median(a)))
    lo = percentile(diffs, 100 * (1 - level) / 2)
    hi = percentile(diffs, 100 * (1 + level) / 2)
    return lo, hi  # type: ignore[return-value]  # diffs has n_resamples items, so neither is None


def samples_verdict(
    before: Sequence[float | None],
    after: Sequence[float | None],
    higher_is_better: bool,
    noise_floor: float = DEFAULT_NOISE_FLOOR,
) -> NoiseVerdict:
    """Beyond noise when the bootstrap CI of the median difference excludes 0 and the change passes the floor."""
    xs_before = [x for x in before if x is not None]
    xs_after = [x for x in after if x is not None]
    if len(xs_before) < MIN_BOOTSTRAP_SAMPLES or len(xs_after) < MIN_BOOTSTRAP_SAMPLES:
        return NoiseVerdict(
            UNKNOWN, "bootstrap", f"{len(xs_before)} and {len(xs_after)} samples; need {MIN_BOOTSTRAP_SAMPLES}"
        )
    lo, hi = bootstrap_diff_ci(xs_before, xs_after)
    base = median(xs_before)
    # >= 3 numbers a side: a median unless all are NaN
    rel = (cast(float, median(xs_after)) - base) / abs(base) if base else math.inf
    detail = f"95% CI of the difference [{lo:.3g}, {hi:.3g}], n={len(xs_before)}/{len(xs_after)}"
    if lo <= 0 <= hi or abs(rel) < noise_floor:
        return NoiseVerdict(WITHIN, "bootstrap", detail)
    up = lo > 0
    return NoiseVerdict(BETTER if up == higher_is_better else WORSE, "bootstrap", detail)


def distribution_verdict(
    before: Distribution | None,
    after: Distribution | None,
    higher_is_better: bool,
    noise_floor: float = DEFAULT_NOISE_FLOOR,
) -> NoiseVerdict:
    """Without raw samples: beyond noise only when one run's median lies past the other's maximum."""
    if before is None or after is None or None in (before.p50, before.max, after.p50, after.max):
        return NoiseVerdict(UNKNOWN, "range", "no p50/max to compare")
    b50, bmax, a50, amax = (float(cast(float, x)) for x in (before.p50, before.max, after.p50, after.max))
    if b50 and abs(a50 - b50) / abs(b50) < noise_floor:
        return NoiseVerdict(WITHIN, "range", f"medians differ by less than {noise_floor:.0%}")
    if a50 > bmax:
        up = True
    elif b50 > amax:
        up = False
    else:
        return NoiseVerdict(WITHIN, "range", "medians inside each other's range")
    return NoiseVerdict(BETTER if up == higher_is_better else WORSE, "range", "median beyond the other run's max")
