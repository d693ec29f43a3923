"""`evalkit bench --until-sure`: a prompt (or the concurrent streams) is measured again until the 95% interval of its
median rate lies within ±margin of it (default ±1%), at least `--runs` and at most `--max-runs` times.

The interval is distribution-free (evalkit.stats.median_interval: two order statistics chosen by the binomial), so it
holds the true median at least 95% of the time whatever the rates' spread, and it needs 6 runs to exist: a prompt is
never sure before its sixth run. A percentile bootstrap was tried first: stopping when it was narrow, its intervals
held the jittery sim's true rate in 69 of 90 prompts (benchmarks/bench_time_to_verdict.py).

Runs keep the plan's order (run 1 of every prompt, then run 2 ...), and a prompt that is sure is simply not sent
again: a run that stops early is a prefix of the `--max-runs` one, and a resumed run decides from the same lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from evalkit.stats import median, median_interval

DEFAULT_MARGIN = 0.01
DEFAULT_MAX_RUNS = 20


class RateSureJson(TypedDict):
    """A bench prompt's (or the streams') `until_sure` block in summary.json (`RateCheck.to_json`)."""

    sure: bool
    interval: list[float] | None
    n: int


@dataclass(frozen=True)
class RateCheck:
    """How sure one median rate is after its runs so far."""

    median: float | None
    interval: tuple[float, float] | None
    n: int
    sure: bool

    def to_json(self) -> RateSureJson:
        """The prompt entry's `until_sure` block in summary.json."""
        return {
            "sure": self.sure,
            "interval": list(self.interval) if self.interval is not None else None,
            "n": self.n,
        }


def rate_check(rates: list[float], margin: float, min_runs: int) -> RateCheck:
    """Sure when at least `min_runs` rates were measured and the 95% interval of their median (6 rates or more)
    lies within ±margin of it."""
    m = median(rates)
    ci = median_interval(rates)
    sure = m is not None and ci is not None and len(rates) >= min_runs and (ci[1] - ci[0]) / 2 <= margin * abs(m)
    return RateCheck(m, ci, len(rates), bool(sure))
