"""How often `capability --repeats auto`'s interval holds the true pass@1 when the run stops (issue #54).

Each seeded run draws one dataset of Q questions with known difficulties p_q (all equal to the accuracy, or spread:
Beta with that mean and a + b = 2, most questions nearly always right or nearly always wrong), then samples rounds
of answers (question q right with probability p_q) and applies the stopping rule round by round as
`evals/repeats_auto.py` does: after round K the interval of the K x Q samples' correct count (`pass_interval`), sure
when `is_sure` (from round 2, half-width within the margin); the first sure round ends the run, else round
`max_repeats` does. The truth is the mean of the drawn p_q: pass@1 of these questions asked without end, what the
sampling interval is about. A run holds when its last interval contains it. Each setting is also marked when
`unreachable` refuses it before a run (its worst case does not reach the margin in `max_repeats` rounds): its runs
are simulated all the same, the interval's promise does not depend on the refusal.

The rule before (the Wilson interval at 95% at every look) is simulated on the same draws, for comparison.
tests/test_capability_repeats_auto.py checks that these counts decide exactly as `decide_repeats` does on graded
lines, and repeats a few settings in seconds.

    python benchmarks/bench_repeats_coverage.py [--runs 1000] [--max-repeats 10] [--seed 54]
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
import time
from collections.abc import Callable

from evalkit.stats import wilson_interval
from evalkit_evals.repeats_auto import RepeatsRule, is_sure, pass_interval, unreachable

Interval = Callable[[int, int], tuple[float, float]]


def difficulties(rng: random.Random, questions: int, accuracy: float, spread: bool) -> list[float]:
    """Each question's chance of a right answer: all `accuracy`, or Beta(2 acc, 2 (1 - acc)) draws."""
    if not spread:
        return [accuracy] * questions
    return [rng.betavariate(2 * accuracy, 2 * (1 - accuracy)) for _ in range(questions)]


def one_run(rng: random.Random, ps: list[float], rule: RepeatsRule, interval: Interval) -> tuple[int, bool, bool]:
    """Rounds until the rule stops: (rounds, decided, the last interval holds the truth)."""
    truth = sum(ps) / len(ps)
    hits = 0
    ci: tuple[float, float] | None = None
    for rounds in range(1, rule.max_repeats + 1):
        hits += sum(rng.random() < p for p in ps)
        ci = interval(hits, rounds * len(ps)) if rounds >= 2 else None  # one round: no interval (sampling_interval)
        if is_sure(ci, rounds, rule.margin):
            return rounds, True, ci is not None and ci[0] <= truth <= ci[1]
    return rule.max_repeats, False, ci is not None and ci[0] <= truth <= ci[1]


def coverage(
    questions: int, accuracy: float, spread: bool, rule: RepeatsRule, runs: int, seed: int, interval: Interval
) -> dict[str, float]:
    """`runs` seeded runs of one setting: the share held, decided, held among the decided and the mean rounds."""
    rng = random.Random(f"{seed}:{questions}:{accuracy}:{spread}:{rule.margin}:{rule.max_repeats}")
    held = decided = held_decided = rounds_sum = 0
    for _ in range(runs):
        ps = difficulties(rng, questions, accuracy, spread)
        rounds, dec, ok = one_run(rng, ps, rule, interval)
        held += ok
        decided += dec
        held_decided += ok and dec
        rounds_sum += rounds
    return {
        "held": held / runs,
        "decided": decided / runs,
        "held_of_decided": held_decided / decided if decided else float("nan"),
        "rounds": rounds_sum / runs,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000, help="seeded runs per setting")
    ap.add_argument("--max-repeats", type=int, default=10)
    ap.add_argument("--seed", type=int, default=54)
    args = ap.parse_args()
    sizes, accuracies, margins = (10, 20, 50, 200), (0.05, 0.3, 0.5, 0.7, 0.95), (0.05, 0.1, 0.15)
    print(
        f"repeats coverage: {args.runs} seeded runs per setting, --max-repeats {args.max_repeats}, seed {args.seed}; "
        "held = the last interval contains the mean of the drawn difficulties",
        flush=True,
    )
    print(
        "| Q | accuracy | difficulty | margin | refused | decided | rounds | held | held of decided "
        "| before: decided | rounds | held |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.monotonic()
    worst_now, worst_before, worst_decided = 1.0, 1.0, 1.0
    for q in sizes:
        for margin in margins:
            rule = RepeatsRule(margin=margin, max_repeats=args.max_repeats)
            now: Interval = functools.lru_cache(maxsize=None)(lambda k, n, m=rule.max_repeats: pass_interval(k, n, m))
            before: Interval = functools.lru_cache(maxsize=None)(wilson_interval)
            refused = unreachable(rule, {"d": q}) is not None
            for acc in accuracies:
                for spread in (False, True):
                    a = coverage(q, acc, spread, rule, args.runs, args.seed, now)
                    b = coverage(q, acc, spread, rule, args.runs, args.seed, before)
                    worst_now, worst_before = min(worst_now, a["held"]), min(worst_before, b["held"])
                    if not refused:
                        worst_decided = min(worst_decided, a["held_of_decided"])
                    print(
                        f"| {q} | {acc:g} | {'spread' if spread else 'equal'} | {margin:g} | "
                        f"{'yes' if refused else 'no'} | {a['decided']:.3f} | {a['rounds']:.1f} | {a['held']:.3f} | "
                        f"{a['held_of_decided']:.3f} | {b['decided']:.3f} | {b['rounds']:.1f} | {b['held']:.3f} |",
                        flush=True,
                    )
    n = len(sizes) * len(accuracies) * len(margins) * 2
    print(
        f"{n} settings x {args.runs} runs in {time.monotonic() - t0:.0f} s: held at least {worst_now:.3f} at every "
        f"setting (of decided runs, margin accepted: {worst_decided:.3f}); the rule before: {worst_before:.3f}; "
        f"every setting at least 0.95: {worst_now >= 0.95}"
    )
    return 0 if worst_now >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
