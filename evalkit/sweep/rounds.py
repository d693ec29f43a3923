"""Interleaving two builds: the round plan of a sweep with `[interleave]`. Its two points are measured in alternating
rounds, each round's order (A then B, or B then A) drawn from a generator seeded by the file, so drift between
sessions (heat, other load, the host's clocks) falls on both builds alike and the rounds can be compared pair by pair
(`evalkit.runs.paired_rounds`). Round r of a point runs every [[run]] against a fresh start of its server, into
`points/POINT/round-RR/RUN/`. A round done is kept when the sweep is started again, and more rounds in the file are
added after the ones done, in the order the same seed gives them."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.runs.sweepdir import PENDING, Interleave, SweepState, round_tag, write_state
from evalkit.sweep.leftovers import stop_leftovers
from evalkit.sweep.points import Point
from evalkit.sweep.runner import PointRun, Say, SweepPlan
from evalkit.sweep.sweep_file import InterleaveSpec


def round_order(points: Sequence[str], rounds: int, seed: int) -> list[list[str]]:
    """Each round's order of the points: a seeded shuffle per round, drawn in round order (so a longer plan with the
    same seed begins with the rounds of a shorter one)."""
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        order = list(points)
        rng.shuffle(order)
        out.append(order)
    return out


def plan_rounds(spec: InterleaveSpec, points: Sequence[Point], baseline: str) -> Interleave:
    """The rounds of an interleaved sweep over its two points (the baseline first in the list each round shuffles);
    a sweep of another number of points is a usage error."""
    if len(points) != 2:
        listed = ", ".join(p.name for p in points)
        raise UsageError(f"[interleave] alternates two points (two builds); this sweep has {len(points)}: {listed}")
    names = [baseline] + [p.name for p in points if p.name != baseline]
    return Interleave(spec.rounds, spec.seed, round_order(names, spec.rounds, spec.seed))


def run_rounds(plan: SweepPlan, sweep_dir: Path, state: SweepState, say: Say) -> SweepState:
    """Run every round not done yet, each round's two points in its drawn order. A point that fails in a round is
    recorded (that round drops out of the paired comparison) and the rounds go on; the point ends failed."""
    assert state.interleave is not None
    stop_leftovers(sweep_dir, say, plan.sweep.server.stop_timeout_s)
    by_name = {p.name: p for p in plan.points}
    for name in by_name:  # this invocation's outcome; the rounds' finished runs are kept
        rec = state.point(name)
        rec.status, rec.failure, rec.log_tail, rec.started, rec.finished = PENDING, None, [], None, None
    write_state(sweep_dir, state)
    rounds = state.interleave.order
    for r, order in enumerate(rounds, 1):
        say(f"round {r} of {len(rounds)}: {' then '.join(order)}")
        for name in order:
            PointRun(plan, sweep_dir, state, by_name[name], say, round_tag(r)).go_round(last=r == len(rounds))
    return state
