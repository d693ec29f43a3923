"""Why `evalkit sweep` interleaves two builds in a randomized order (issue #54 item 4): evalkit's one comparison
rule on simulated sessions that drift, measured three ways.

A session measures build A and build B, 6 times each (bench decode tok/s, say). The machine drifts: its rate falls
linearly by `--drift` over the session (heat, another job starting), each measurement has `--noise` log-normal noise,
and the second of two back-to-back measurements runs `--order-effect` slower (a warm cache, a clock that stepped
down). Measured:
- sequential: A six times, then B six times (two sessions one after the other), compared by the rank test
  (`compare_samples`): the drift lands on B alone;
- alternating, fixed order: A B, A B, ... compared round by round (`compare_paired`): the order effect lands on B
  alone;
- alternating, order drawn per round (what `[interleave]` does), compared round by round: drift and order effect
  fall on either build alike.
Printed: the share of identical-build sessions called beyond noise (the level is 5%), and of sessions with B truly
`--change` faster called ▲.

    python benchmarks/bench_interleave_drift.py [--trials 4000] [--drift 0.04] [--order-effect 0.02]
"""

from __future__ import annotations

import argparse
import random

from evalkit import comparison


def session(
    rng: random.Random, rounds: int, change: float, drift: float, noise: float, order: float, how: str
) -> comparison.Comparison:
    """One session's comparison of B against A, measured `how` (sequential | fixed | random)."""
    slots = 2 * rounds

    def measure(slot: int, build: str, second: bool) -> float:
        machine = 1 - drift * slot / (slots - 1)
        true = 100.0 * (1 + change if build == "B" else 1.0)
        return true * machine * (1 - order if second else 1.0) * rng.lognormvariate(0.0, noise)

    if how == "sequential":
        a = [measure(i, "A", False) for i in range(rounds)]
        b = [measure(rounds + i, "B", False) for i in range(rounds)]
        return comparison.compare_samples(a, b, True)
    a, b = [], []
    for r in range(rounds):
        first = "A" if how == "fixed" or rng.random() < 0.5 else "B"
        vals = {first: measure(2 * r, first, False)}
        second = "B" if first == "A" else "A"
        vals[second] = measure(2 * r + 1, second, True)
        a.append(vals["A"])
        b.append(vals["B"])
    return comparison.compare_paired(a, b, True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--drift", type=float, default=0.04, help="the rate lost over a session (default 4%%)")
    ap.add_argument("--noise", type=float, default=0.01, help="log-normal sigma of one measurement (default 1%%)")
    ap.add_argument("--order-effect", type=float, default=0.02, help="the second of a pair runs this much slower")
    ap.add_argument("--change", type=float, default=0.05, help="B's true speed-up for the power line (default 5%%)")
    ap.add_argument("--seed", type=int, default=54)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    print(
        f"{args.trials} sessions each, {args.rounds} measurements a build; drift {args.drift:.0%} over a session, "
        f"noise {args.noise:.0%}, order effect {args.order_effect:.0%}; level {comparison.LEVEL}"
    )
    print(f"| measured | identical builds called beyond noise | B {args.change:+.0%} called ▲ |")
    print("| --- | ---: | ---: |")
    for how in ("sequential", "fixed", "random"):
        false = sum(
            session(rng, args.rounds, 0.0, args.drift, args.noise, args.order_effect, how).beyond
            for _ in range(args.trials)
        )
        found = sum(
            session(rng, args.rounds, args.change, args.drift, args.noise, args.order_effect, how).mark
            == comparison.BETTER
            for _ in range(args.trials)
        )
        print(f"| {how} | {false / args.trials:.1%} | {found / args.trials:.1%} |")


if __name__ == "__main__":
    main()
