"""The report's marks for a before/after change, made by the one comparison rule (evalkit.comparison: the
Mann-Whitney rank test on raw samples, at a stated level, never under the noise floor); paired answers by McNemar's
exact test elsewhere (evals.question_scores).

Marks: `▲` beyond noise and better, `▼` beyond noise and worse, `≈` within noise, `?` can't tell (too few samples
for the test to reach its level, or no raw samples to test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalkit import comparison
from evalkit.runs.summary_parts import Distribution

BETTER, WORSE, WITHIN, UNKNOWN = comparison.BETTER, comparison.WORSE, comparison.WITHIN, comparison.UNKNOWN
ALPHA = comparison.LEVEL
# Client-timed rates of one build wander by about a percent from run to run (clocks, other load); a change
# smaller than this is never called real, however small its p-value.
DEFAULT_NOISE_FLOOR = comparison.NOISE_FLOOR


@dataclass(frozen=True)
class NoiseVerdict:
    """The mark for one change and how it was decided (`comparison` holds the test, its p-value and level)."""

    mark: str
    method: str
    detail: str
    comparison: comparison.Comparison | None = None

    @property
    def beyond(self) -> bool:
        """True when the change is beyond noise (either direction)."""
        return self.mark in (BETTER, WORSE)

    @property
    def level(self) -> float | None:
        """The level the call was made at (None for a mark no test made)."""
        return self.comparison.level if self.comparison is not None else None


def from_comparison(c: comparison.Comparison) -> NoiseVerdict:
    """A report mark from the one rule's comparison."""
    detail = c.detail if c.why is None else f"can't tell: {c.why}"
    return NoiseVerdict(c.mark, c.method, detail, c)


def samples_verdict(
    before: Sequence[float | None],
    after: Sequence[float | None],
    higher_is_better: bool,
    noise_floor: float = DEFAULT_NOISE_FLOOR,
    level: float = ALPHA,
) -> NoiseVerdict:
    """Beyond noise when the rank test of the raw samples rejects at `level` and the median moved past the floor."""
    return from_comparison(comparison.compare_samples(before, after, higher_is_better, level, noise_floor))


def distribution_verdict(
    before: Distribution | None,
    after: Distribution | None,
    higher_is_better: bool,
    noise_floor: float = DEFAULT_NOISE_FLOOR,
) -> NoiseVerdict:
    """Without raw samples there is nothing to test: never a call ("can't tell"), however far apart the summaries'
    figures lie (a median past the other run's maximum at 3 or 4 samples is a coin with few sides)."""
    del before, after, higher_is_better, noise_floor
    return NoiseVerdict(UNKNOWN, "none", "can't tell: no raw samples to test")


def family(
    verdicts: dict[str, NoiseVerdict],
    higher_is_better: dict[str, bool],
    level: float = ALPHA,
    noise_floor: float = DEFAULT_NOISE_FLOOR,
) -> dict[str, NoiseVerdict]:
    """The figures of one pair of runs compared together: every tested one read again at its Holm level, so the
    chance that an identical pair has any figure called beyond noise is at most `level`."""
    keys = [k for k, v in verdicts.items() if v.comparison is not None and v.comparison.p is not None]
    tested = [verdicts[k].comparison for k in keys]
    adjusted = comparison.holm(
        [c for c in tested if c is not None], [higher_is_better[k] for k in keys], level, noise_floor
    )
    out = dict(verdicts)
    for k, c in zip(keys, adjusted):
        v = from_comparison(c)
        out[k] = NoiseVerdict(v.mark, v.method, f"{v.detail} (Holm over {len(keys)} figures)", c)
    return out
