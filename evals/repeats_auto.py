"""`evalkit capability --repeats auto`: ask the questions round after round (repeat 0, 1, ...) at temperature > 0 until
each dataset's pass@1 is sure within ±margin, at most `max_repeats` rounds.

The interval here is the sampling one: how far pass@1 of *these* questions could move if each were asked again. It is
the exact (Clopper-Pearson) interval of all the dataset's correct samples out of K x Q, at level 1 - 0.05 /
max_repeats at every round: the run looks again after each round and stops at the first narrow interval, so each look
spends its share of the 5% (Bonferroni over the rounds) and the interval it stops on holds the truth at least 95% of
the time whichever round that is. Pooling the K x Q samples is conservative for questions of unequal difficulty (the
count's variance is the sum of p_q (1 - p_q), at most the pooled p (1 - p) K Q, and its tails no heavier than the
binomial's). The Wilson interval at 95% a look, used first, held the truth in 92-95% of seeded runs
(benchmarks/bench_repeats_coverage.py); this rule in at least 98% at every setting measured. A margin that even the
widest interval after `max_repeats` rounds (half the samples correct) would not reach is refused before the run
(`unreachable`): an accepted run is decided by its last round whatever the answers. The summary's `ci95` beside
pass@1 is another thing, the spread over questions (how the score would move with another question set), which more
repeats do not narrow. At temperature 0 every repeat is the same answer: one pass is all there is.

Against a baseline run (`--baseline RUN_DIR`, its graded answers to the same questions), a dataset is decided instead
when its comparison is: beyond noise by the report's paired test (McNemar's exact test on the questions both runs
answered; with repeats, the sign test of the questions whose mean moved), at 0.05 divided by the most rounds, since
every round looks again and each look could call noise a change; or equivalent, when the difference of the two
pass@1s lies inside ±margin by both runs' sampling intervals (97.5% each, so the difference holds with at least 95%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from evalkit.runs.rundir import read_jsonl
from evalkit.stats import clopper_pearson_interval, mcnemar_exact_p, wilson_interval
from evalkit_evals.question_scores import Graded, QuestionScore, graded_lines, paired_changes, question_scores

FILE = "repeats_auto.jsonl"  # one line per round: each dataset's pass@1 and interval after it
DEFAULT_MARGIN = 0.05
DEFAULT_MAX_REPEATS = 10
MIN_REPEATS = 2
ALPHA = 0.05  # over all the rounds' looks together: each look (a round) is held to ALPHA / max_repeats
Z_975 = 2.2414  # a two-sided 97.5% interval: two of them hold together at least 95% of the time


class _RuleBounds(TypedDict):
    margin: float
    max_repeats: int


class RuleJson(_RuleBounds, total=False):
    """A `RepeatsRule` as the manifest and summary record it: the baseline only where one is given."""

    baseline: str


class BaselineComparison(TypedDict, total=False):
    """One dataset against the baseline (`baseline_comparison`): the verdict, and why (nothing to compare) or the
    paired counts, the p-value, the level it was held to and the difference with its interval."""

    verdict: str
    why: str
    paired: int
    lost: int
    gained: int
    p: float
    level: float
    difference: float
    difference_interval: list[float]


class _DatasetDecision(TypedDict):
    pass_at_1: float
    interval: list[float] | None
    sure: bool


class DatasetDecision(_DatasetDecision, total=False):
    """One dataset's entry of a round's decision (`decide_repeats`): pass@1, its sampling interval, whether it is
    sure, and against a baseline the comparison."""

    vs_baseline: BaselineComparison


class RepeatsDecision(TypedDict):
    """A round's decision (`decide_repeats`), a line of `FILE`: the rounds so far, whether every dataset is sure,
    those that are not, and each dataset's entry."""

    repeats: int
    decided: bool
    undecided: list[str]
    datasets: dict[str, DatasetDecision]


class RepeatsAutoJson(RuleJson, RepeatsDecision):
    """A summary's `repeats_auto`: the rule and its last decision, in that order."""


@dataclass(frozen=True)
class RepeatsRule:
    """When `--repeats auto` stops: the interval's half-width (a share of 1, pass@1's scale) and the most rounds."""

    margin: float = DEFAULT_MARGIN
    max_repeats: int = DEFAULT_MAX_REPEATS
    baseline: str | None = None  # a capability run directory to compare against, instead of each pass@1 alone

    def to_json(self) -> RuleJson:
        """As the manifest and summary record it."""
        out: RuleJson = {"margin": self.margin, "max_repeats": self.max_repeats}
        if self.baseline:
            out["baseline"] = self.baseline
        return out

    def baseline_scores(self) -> dict[str, QuestionScore] | None:
        """The baseline run's per-question scores (its graded.jsonl), or None without a baseline."""
        if self.baseline is None:
            return None
        return question_scores(graded_lines(read_jsonl(Path(self.baseline) / "graded.jsonl")))


def look_level(max_repeats: int) -> float:
    """The confidence level of each round's interval: 1 - ALPHA / max_repeats, so that the interval of whichever round
    the run stops at holds the truth with at least 1 - ALPHA (Bonferroni over the rounds' looks)."""
    return 1 - ALPHA / max_repeats


def pass_interval(hits: int, samples: int, max_repeats: int) -> tuple[float, float]:
    """The interval of pass@1 from `hits` correct samples of `samples` (K x Q), as each round's look holds it."""
    return clopper_pearson_interval(hits, samples, look_level(max_repeats))


def sampling_interval(
    scores: list[QuestionScore], max_repeats: int = DEFAULT_MAX_REPEATS
) -> tuple[float, float] | None:
    """The interval of pass@1 over the questions' repeats, at one look of a run of at most `max_repeats` rounds: the
    exact interval of every correct sample out of all samples (None without two repeats anywhere)."""
    if not scores or max(s.n for s in scores) < 2:
        return None
    return pass_interval(*_hits(scores), max_repeats)


def is_sure(ci: tuple[float, float] | None, rounds: int, margin: float) -> bool:
    """A dataset is sure after `rounds` rounds when its interval's half-width is within the margin (from round 2 on)."""
    return ci is not None and rounds >= MIN_REPEATS and (ci[1] - ci[0]) / 2 <= margin


def worst_half_width(questions: int, rounds: int, max_repeats: int) -> float:
    """The widest half-width the interval can have after `rounds` rounds of `questions` questions: at half the samples
    correct (the exact interval is widest at the middle count)."""
    n = questions * rounds
    return max((hi - lo) / 2 for lo, hi in (pass_interval(k, n, max_repeats) for k in {n // 2, (n + 1) // 2}))


def smallest_reachable(questions: int, max_repeats: int) -> float:
    """The smallest margin a dataset of `questions` questions is sure to reach within `max_repeats` rounds, whatever
    the answers (two decimals, rounded up)."""
    return math.ceil(worst_half_width(questions, max_repeats, max_repeats) * 100 - 1e-9) / 100


def rounds_needed(questions: int, margin: float, start: int = MIN_REPEATS, limit: int = 1000) -> int | None:
    """The fewest `--max-repeats` from `start` on at which `margin` is reached whatever the answers (None beyond
    `limit`)."""
    for m in range(start, limit + 1):
        if worst_half_width(questions, m, m) <= margin:
            return m
    return None


def unreachable(rule: RepeatsRule, sizes: dict[str, int]) -> str | None:
    """The one line refusing `rule` before a run of datasets of `sizes` questions, when some dataset's interval could
    still be wider than the margin after `max_repeats` rounds (its answers half right: the worst case); None when
    every dataset is sure to be decided. Against a baseline a comparison can be decided beyond noise at any margin:
    nothing is refused."""
    if rule.baseline is not None:
        return None
    short = [
        ds for ds, q in sizes.items() if q > 0 and worst_half_width(q, rule.max_repeats, rule.max_repeats) > rule.margin
    ]
    if not short:
        return None
    ds = min(short, key=lambda d: sizes[d])
    q = sizes[ds]
    need = rounds_needed(q, rule.margin, start=rule.max_repeats + 1)
    rest = [f"{d} ({sizes[d]})" for d in short if d != ds]
    also = f"; also {', '.join(rest)}" if rest else ""
    fix = f"raise --max-repeats to {need} or --margin" if need is not None else "raise --margin or ask more questions"
    return (
        f"--margin {rule.margin:g} cannot be reached for {ds} ({q} questions{also}) in {rule.max_repeats} rounds; "
        f"the smallest reachable is ±{smallest_reachable(q, rule.max_repeats):.2f} ({fix})"
    )


def _hits(scores: list[QuestionScore]) -> tuple[int, int]:
    """Every correct sample of these questions, and every sample."""
    return sum(sum(o == "correct" for o in s.outcomes) for s in scores), sum(s.n for s in scores)


def baseline_comparison(
    scores: list[QuestionScore], base: dict[str, QuestionScore], rule: RepeatsRule, rounds: int
) -> BaselineComparison:
    """One dataset against the baseline's answers to the same questions: "beyond noise" (better or worse),
    "equivalent", or "undecided", with the paired counts, the p-value, the level it was held to and the difference's
    interval."""
    mine = [s for s in scores if s.qid in base]
    if not mine:
        return {"verdict": "undecided", "why": "the baseline answered none of these questions"}
    theirs = [base[s.qid] for s in mine]
    pc = paired_changes(base, {s.qid: s for s in mine})
    lost, gained = pc.lost, pc.gained
    p = mcnemar_exact_p(lost, gained)
    level = ALPHA / rule.max_repeats
    diff = sum(a.score - b.score for a, b in zip(mine, theirs)) / len(mine)
    lo_a, hi_a = wilson_interval(*_hits(mine), z=Z_975)
    lo_b, hi_b = wilson_interval(*_hits(theirs), z=Z_975)
    d_lo, d_hi = lo_a - hi_b, hi_a - lo_b
    if rounds >= MIN_REPEATS and p < level:
        verdict = "better" if gained > lost else "worse"
    elif rounds >= MIN_REPEATS and -rule.margin <= d_lo and d_hi <= rule.margin:
        verdict = "equivalent"
    else:
        verdict = "undecided"
    return {
        "verdict": verdict,
        "paired": pc.paired,
        "lost": lost,
        "gained": gained,
        "p": round(p, 6),
        "level": level,
        "difference": round(diff, 4),
        "difference_interval": [round(d_lo, 4), round(d_hi, 4)],
    }


def decide_repeats(
    lines: Sequence[Graded], rule: RepeatsRule, rounds: int, baseline: dict[str, QuestionScore] | None = None
) -> RepeatsDecision:
    """After `rounds` rounds: each dataset's pass@1, its sampling interval, and whether every one is sure (against
    a baseline: whether every comparison is decided); a line of `FILE` (`repeats`, `decided`, `undecided`,
    `datasets`: each a `DatasetDecision`)."""
    by_ds: dict[str, list[QuestionScore]] = {}
    for s in question_scores(graded_lines(lines)).values():
        by_ds.setdefault(s.dataset, []).append(s)
    datasets: dict[str, DatasetDecision] = {}
    for ds, scores in by_ds.items():
        value = sum(s.score for s in scores) / len(scores)
        ci = sampling_interval(scores, rule.max_repeats)
        sure = is_sure(ci, rounds, rule.margin)
        datasets[ds] = {
            "pass_at_1": round(value, 4),
            "interval": [round(ci[0], 4), round(ci[1], 4)] if ci else None,
            "sure": sure,
        }
        if baseline is not None:
            vs = baseline_comparison(scores, baseline, rule, rounds)
            datasets[ds]["vs_baseline"] = vs
            datasets[ds]["sure"] = vs["verdict"] != "undecided"
    undecided = [ds for ds, d in datasets.items() if not d["sure"]]
    return {"repeats": rounds, "decided": not undecided, "undecided": undecided, "datasets": datasets}


def decision_line(d: RepeatsDecision, rule: RepeatsRule) -> str:
    """One line for standard error after a round."""
    parts = [
        f"{ds} {x['pass_at_1']:.3f}"
        + (f" [{x['interval'][0]:.3f}, {x['interval'][1]:.3f}]" if x["interval"] else "")
        + (f" vs baseline: {_vs_words(x['vs_baseline'])}" if "vs_baseline" in x else "")
        for ds, x in d["datasets"].items()
    ]
    state = "decided" if d["decided"] else f"undecided: {', '.join(d['undecided'])}"
    return f"repeats auto: after {d['repeats']} round(s) (±{rule.margin:g}) {state}; " + "; ".join(parts)


def _vs_words(vs: BaselineComparison) -> str:
    if "p" not in vs:
        return f"{vs['verdict']} ({vs.get('why', '')})"
    lo, hi = vs["difference_interval"]
    return (
        f"{vs['verdict']} ({vs['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}], {vs['lost']} lost, {vs['gained']} gained, "
        f"p={vs['p']:.3g} at {vs['level']:.3g})"
    )
