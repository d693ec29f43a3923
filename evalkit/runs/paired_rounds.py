"""The paired comparison of an interleaved sweep's two points (`[interleave]`, evalkit.sweep.rounds): a figure's value
in each round (its headline in that round's summary: bench's median tok/s, a stress metric's p95, ...) for the
baseline point and the other, compared round by round with the one rule's paired test
(`evalkit.comparison.compare_paired`: the Wilcoxon signed-rank test on the per-round log ratios, 6 rounds to reach
the 0.05 level). Report and gate both read it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import median

from evalkit import comparison
from evalkit.runs.summaries import FinishedRun, load_runs, lookup, runs_by_kind
from evalkit.runs.sweepdir import SweepState, round_runs

PAIRED_NOTE = "paired over {n} rounds (signed-rank)"


@dataclass(frozen=True)
class Rounds:
    """An interleaved sweep's two points and each one's runs by kind, round by round (an empty dict for a round a
    point did not finish)."""

    baseline: str
    other: str
    base_rounds: list[dict[str, FinishedRun]]
    other_rounds: list[dict[str, FinishedRun]]

    def values(self, metric: str) -> tuple[list[float | None], list[float | None]]:
        """The figure `<kind>.<path>` in each round, baseline and other (None where a round lacks it)."""
        return [lookup(metric, r) for r in self.base_rounds], [lookup(metric, r) for r in self.other_rounds]

    def paired_rounds(self, metric: str) -> int:
        """How many rounds hold the figure on both sides."""
        b, o = self.values(metric)
        return sum(x is not None and y is not None for x, y in zip(b, o))


@dataclass(frozen=True)
class PairedFigure:
    """One figure compared round by round: the per-round values and the paired test's comparison."""

    metric: str
    higher_is_better: bool
    before: list[float | None]
    after: list[float | None]
    comparison: comparison.Comparison

    @property
    def rounds(self) -> int:
        """The rounds compared (both sides measured)."""
        return self.comparison.n_before

    def medians(self) -> tuple[float | None, float | None]:
        """Each side's median over the rounds compared."""
        pairs = [(b, a) for b, a in zip(self.before, self.after) if b is not None and a is not None]
        if not pairs:
            return None, None
        return median(b for b, _ in pairs), median(a for _, a in pairs)

    def note(self) -> str:
        """`paired over N rounds (signed-rank)`: how the mark was made, for the report and the gate."""
        return PAIRED_NOTE.format(n=self.rounds)

    def how(self) -> str:
        """The note with the test's p-value and the level it was read at (a family's share), or why it can't tell."""
        c = self.comparison
        if c.why:
            return f"{self.note()}: can't tell, {c.why}"
        return f"{self.note()}: p={c.p:.3g} at level {c.level:.3g}" if c.p is not None else self.note()


def sweep_rounds(sweep_dir: Path, state: SweepState, strict: bool = True) -> Rounds | None:
    """The rounds of an interleaved sweep (the baseline point and the other); None for a sweep that is not
    interleaved. Two runs of one kind in a round are a usage error when `strict` (the gate: rules name values by
    kind), else the first one counts (the report, as its key figures do)."""
    il = state.interleave
    if il is None:
        return None
    other = next(p.name for p in state.points if p.name != state.baseline and p.name in il.order[0])

    def by_kind(runs: list[FinishedRun], what: str) -> dict[str, FinishedRun]:
        if strict:
            return runs_by_kind(runs, what)
        out: dict[str, FinishedRun] = {}
        for r in runs:
            out.setdefault(r.kind, r)
        return out

    def per_round(name: str) -> list[dict[str, FinishedRun]]:
        rec = state.point(name)
        return [
            by_kind(load_runs(round_runs(sweep_dir, rec, r)), f"point {name}'s round {r}")
            for r in range(1, il.rounds + 1)
        ]

    return Rounds(state.baseline, other, per_round(state.baseline), per_round(other))


def compare_figure(
    rounds: Rounds,
    metric: str,
    higher_is_better: bool,
    level: float = comparison.LEVEL,
    noise_floor: float = comparison.NOISE_FLOOR,
    scale: float = 1.0,
) -> PairedFigure:
    """One figure of the other point against the baseline point's, round by round (`scale` times the baseline's:
    a gate's relative limit)."""
    before, after = rounds.values(metric)
    limits = [b * scale if b is not None else None for b in before]
    c = comparison.compare_paired(limits, after, higher_is_better, level, noise_floor)
    return PairedFigure(metric, higher_is_better, before, after, c)


def compare_figures(
    rounds: Rounds,
    figures: list[tuple[str, bool]],
    level: float = comparison.LEVEL,
    noise_floor: float = comparison.NOISE_FLOOR,
) -> list[PairedFigure]:
    """Each (metric, higher is better) measured in at least one round on both sides, compared round by round; the
    figures are one family (Holm), so an identical pair has any figure called at most `level` of the time."""
    kept = [(m, h) for m, h in figures if rounds.paired_rounds(m)]
    each = [compare_figure(rounds, m, h, level, noise_floor) for m, h in kept]
    adjusted = comparison.holm([f.comparison for f in each], [h for _, h in kept], level, noise_floor)
    return [PairedFigure(f.metric, f.higher_is_better, f.before, f.after, reachable(c)) for f, c in zip(each, adjusted)]


def reachable(c: comparison.Comparison) -> comparison.Comparison:
    """ "Can't tell" where the rounds cannot reach the level a family's share leaves (the signed-rank test's smallest
    p-value is 2 / 2^n: 6 rounds reach 0.05, 7 reach 0.025, 8 reach 0.0125), not "within noise"."""
    if c.p is None or 2 / 2**c.n_before <= c.level:
        return c
    need = next(k for k in range(1, 64) if 2 / 2**k <= c.level)
    why = f"{c.n_before} paired round(s): a signed-rank test needs {need} to reach the {c.level:.3g} level"
    return comparison.Comparison(
        comparison.UNKNOWN, c.method, c.p, c.level, c.n_before, c.n_after, c.ratio, c.detail, why
    )
