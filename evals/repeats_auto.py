"""`evalkit capability --repeats auto`: ask the questions round after round (repeat 0, 1, ...) at temperature > 0 until
each dataset's pass@1 is sure within ±margin, at most `max_repeats` rounds.

The interval here is the sampling one: how far pass@1 of *these* questions could move if each were asked again. Its
variance is the sum over questions of p_q (1 - p_q) / (K Q^2), at most p (1 - p) / (K Q) for the pooled p: the
Wilson interval of all the dataset's correct samples out of K x Q is therefore a conservative 95% interval (a
bootstrap of each question's own few repeats was tried first: after 2 rounds most questions agree with themselves
and it read ±5 points where the truth was ±10). It shrinks as repeats grow. The summary's `ci95` beside pass@1 is
another thing, the spread over questions (how the score would move with another question set), which more repeats
do not narrow. At temperature 0 every repeat is the same answer: one pass is all there is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from evalkit.stats import wilson_interval
from evalkit_evals.question_scores import QuestionScore, graded_lines, question_scores

FILE = "repeats_auto.jsonl"  # one line per round: each dataset's pass@1 and interval after it
DEFAULT_MARGIN = 0.05
DEFAULT_MAX_REPEATS = 10
MIN_REPEATS = 2


@dataclass(frozen=True)
class RepeatsRule:
    """When `--repeats auto` stops: the interval's half-width (a share of 1, pass@1's scale) and the most rounds."""

    margin: float = DEFAULT_MARGIN
    max_repeats: int = DEFAULT_MAX_REPEATS

    def to_json(self) -> dict[str, Any]:
        """As the manifest and summary record it."""
        return {"margin": self.margin, "max_repeats": self.max_repeats}


def sampling_interval(scores: list[QuestionScore]) -> tuple[float, float] | None:
    """A conservative 95% interval of pass@1 over the questions' repeats: the Wilson interval of every correct sample
    out of all samples (None without two repeats anywhere)."""
    if not scores or max(s.n for s in scores) < 2:
        return None
    hits = sum(sum(o == "correct" for o in s.outcomes) for s in scores)
    return wilson_interval(hits, sum(s.n for s in scores))


def decide_repeats(lines: list[dict[str, Any]], rule: RepeatsRule, rounds: int) -> dict[str, Any]:
    """After `rounds` rounds: each dataset's pass@1, its sampling interval, and whether every one is sure."""
    by_ds: dict[str, list[QuestionScore]] = {}
    for s in question_scores(graded_lines(lines)).values():
        by_ds.setdefault(s.dataset, []).append(s)
    datasets: dict[str, Any] = {}
    for ds, scores in by_ds.items():
        value = sum(s.score for s in scores) / len(scores)
        ci = sampling_interval(scores)
        sure = ci is not None and rounds >= MIN_REPEATS and (ci[1] - ci[0]) / 2 <= rule.margin
        datasets[ds] = {
            "pass_at_1": round(value, 4),
            "interval": [round(ci[0], 4), round(ci[1], 4)] if ci else None,
            "sure": sure,
        }
    undecided = [ds for ds, d in datasets.items() if not d["sure"]]
    return {"repeats": rounds, "decided": not undecided, "undecided": undecided, "datasets": datasets}


def decision_line(d: dict[str, Any], rule: RepeatsRule) -> str:
    """One line for standard error after a round."""
    parts = [
        f"{ds} {x['pass_at_1']:.3f}" + (f" [{x['interval'][0]:.3f}, {x['interval'][1]:.3f}]" if x["interval"] else "")
        for ds, x in d["datasets"].items()
    ]
    state = "decided" if d["decided"] else f"undecided: {', '.join(d['undecided'])}"
    return f"repeats auto: after {d['repeats']} round(s) (±{rule.margin:g}) {state}; " + "; ".join(parts)
