"""`evalkit report SWEEP_DIR`: the usual tables with one column per sweep point (the baseline point first, so every
delta and beyond-noise mark is against it), a table of the points and how each ended, and one small plot per key
figure across the points. Tables come from the same builders as any report (`build.build_context`). An interleaved
sweep (`[interleave]`) adds its two points compared round by round (paired), and its usual tables are those of its
last round."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit import comparison
from evalkit.report import noise
from evalkit.report.build import build_context
from evalkit.report.context import SweepContext
from evalkit.report.render import render
from evalkit.report.runs import LabelledRun
from evalkit.report.sweep_plots import KEY_FIGURES, figure_plots
from evalkit.report.tables import Table
from evalkit.report.trust import MARK, run_flags
from evalkit.runs.paired_rounds import PairedFigure, Rounds, compare_figures, sweep_rounds
from evalkit.runs.summaries import load_runs
from evalkit.runs.sweepdir import DONE, PointRecord, SweepState, finished_runs, read_state, round_runs, round_tag

TEMPLATE = "sweep.md.j2"


def ordered_points(state: SweepState) -> list[PointRecord]:
    """The baseline point first, then the others in sweep order."""
    base = [p for p in state.points if p.name == state.baseline]
    return base + [p for p in state.points if p.name != state.baseline]


def last_round(sweep_dir: Path, state: SweepState) -> int | None:
    """An interleaved sweep's last round that both points finished (None when none did, or it is not interleaved)."""
    if state.interleave is None:
        return None
    done = [
        r
        for r in range(1, state.interleave.rounds + 1)
        if all(round_runs(sweep_dir, state.point(n), r) for n in state.interleave.order[0])
    ]
    return done[-1] if done else None


def point_runs(sweep_dir: Path, state: SweepState) -> list[tuple[PointRecord, list[LabelledRun]]]:
    """Each point (baseline first) with its finished runs, labelled by the point (and the run, when a point has two
    runs of one kind); an interleaved sweep's runs of its last round both points finished."""
    last = last_round(sweep_dir, state)
    out = []
    for rec in ordered_points(state):
        if state.interleave is not None:
            loaded = load_runs(round_runs(sweep_dir, rec, last)) if last is not None else []
        else:
            loaded = load_runs(finished_runs(sweep_dir, rec))
        kinds = [r.kind for r in loaded]
        labelled = [
            LabelledRun(rec.name if kinds.count(r.kind) == 1 else f"{rec.name} ({r.path.name})", r) for r in loaded
        ]
        out.append((rec, labelled))
    return out


def _ran(rec: PointRecord) -> str:
    """The commands a point ran (each with the rounds it ran in, in an interleaved sweep)."""
    counts: dict[str, int] = {}
    for c in rec.commands:
        if c.exit_code is not None:
            run = c.name.rsplit("/", 1)[-1]
            counts[run] = counts.get(run, 0) + 1
    rounds = any("/" in c.name for c in rec.commands)
    return ", ".join(f"{n} ({k} rounds)" if rounds else n for n, k in counts.items()) or "–"


def points_table(state: SweepState) -> Table:
    """One column per point: its parameters, how it ended and the server's exact command."""
    recs = ordered_points(state)
    keys: list[str] = []
    for r in recs:
        keys += [k for k in r.params if k not in keys]
    rows: list[tuple[str, list[str]]] = [(k, [r.params.get(k, "–") or "(empty)" for r in recs]) for k in keys]
    rows.append(("status", [r.status if r.status == DONE else f"{r.status.upper()}: {r.failure or ''}" for r in recs]))
    rows.append(("runs", [_ran(r) for r in recs]))
    notes = [f"Baseline: {state.baseline}; every delta and mark below is against it."]
    notes += [f"{r.name}: `{' '.join(r.server_command)}`" for r in recs if r.server_command]
    return Table("sweep_points", "Points", [r.name for r in recs], rows, notes, row_header="parameter")


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.4g}"


def _change(f: PairedFigure) -> str:
    c = f.comparison
    return c.mark + (f" {(c.ratio - 1) * 100:+.1f}%" if c.ratio is not None else "")


def flagged_rounds(rounds: Rounds, kind: str) -> int:
    """How many rounds hold a run of this kind, on either side, that flags its own figures (report.trust)."""
    count = 0
    for base, other in zip(rounds.base_rounds, rounds.other_rounds):
        pair = [r for r in (base.get(kind), other.get(kind)) if r is not None]
        count += any(run_flags(LabelledRun(r.path.name, r)) for r in pair)
    return count


def paired_tables(rounds: Rounds, state: SweepState) -> list[Table]:
    """An interleaved sweep's key figures compared round by round: the paired marks, then every round's values."""
    assert state.interleave is not None
    titles = {f.metric: f.title for f in KEY_FIGURES}
    figures = compare_figures(rounds, [(f.metric, f.higher_is_better) for f in KEY_FIGURES])
    if not figures:
        return []
    a, b = rounds.baseline, rounds.other
    rows = []
    for f in figures:
        ma, mb = f.medians()
        flagged = flagged_rounds(rounds, f.metric.partition(".")[0])
        trust = f"; {MARK} {flagged} of {f.rounds} rounds flag their own figures" if flagged else ""
        rows.append((titles[f.metric], [_num(ma), _num(mb), _change(f), f.how() + trust]))
    il = state.interleave
    order = "; ".join(f"{r} {' then '.join(o)}" for r, o in enumerate(il.order, 1))
    notes = [
        f"The comparison was paired: {a} and {b} ran in {il.rounds} alternating rounds (each round's order drawn "
        f"with seed {il.seed}: {order}), and each figure's value in a round (its headline in that round's summary) "
        f"of {b} is set against {a}'s of the same round. Marks: the Wilcoxon signed-rank test of the per-round log "
        f"ratios at level {comparison.LEVEL:g}, Holm over the {len(figures)} figures, never under the "
        f"{comparison.NOISE_FLOOR:.0%} noise floor; 'change' is the median per-round ratio; ? where the rounds "
        "cannot reach the level. A round whose runs flag their own figures (a distorted or busy client, "
        f"{MARK}) stays in: each round's order is drawn at random, so whatever the machine did within a round "
        "falls on either build alike and cannot make identical builds look different beyond the level; it can "
        "blur the size of a real change.",
    ]
    marks = Table(
        "sweep_paired",
        f"{b} against {a}, paired over the rounds",
        [f"{a} (median of rounds)", f"{b} (median of rounds)", "change", "how it was decided"],
        rows,
        notes,
        row_header="figure",
    )
    cols = [round_tag(r) + f" ({o[0]} first)" for r, o in enumerate(il.order, 1)]
    per_round = []
    for f in figures:
        per_round.append((f"{titles[f.metric]}: {a}", [_num(v) for v in f.before]))
        per_round.append((f"{titles[f.metric]}: {b}", [_num(v) for v in f.after]))
    values = Table("sweep_rounds", "Each round's values", cols, per_round, [], row_header="figure")
    return [marks, values]


def sweep_context(
    sweep_dir: Path, out_md: Path, noise_floor: float = noise.DEFAULT_NOISE_FLOOR, cycle: Any = None
) -> tuple[SweepContext, list[LabelledRun]]:
    """The report context of a sweep (`build_context` over every point's runs, plus the points and their plots) and
    the labelled runs it was built from."""
    state = read_state(sweep_dir)
    per_point = point_runs(sweep_dir, state)
    runs = [r for _, rs in per_point for r in rs]
    report = build_context(runs, None, out_md, noise_floor, cycle)
    rounds = sweep_rounds(sweep_dir, state, strict=False)
    last = last_round(sweep_dir, state)
    context: SweepContext = {
        **report,
        "title": f"evalkit sweep: {state.name} ({len(state.points)} points, baseline {state.baseline})",
        "points": points_table(state),
        "failed": [
            {"name": r.name, "failure": r.failure or r.status, "log_tail": r.log_tail}
            for r, _ in per_point
            if r.status != DONE
        ],
        "figure_plots": figure_plots(per_point, out_md, state.baseline),
        "key_figures": [f.title for f in KEY_FIGURES],
        "paired": paired_tables(rounds, state) if rounds is not None else [],
    }
    if last is not None:
        context["points"].notes.append(
            f"Interleaved: the tables after the paired comparison are {round_tag(last)}'s runs alone; the paired "
            "marks are the ones that count."
        )
    return context, runs


@dataclass(frozen=True)
class SweepReport:
    """A rendered sweep report: its markdown, the plot files written beside it, and what report.html is built from."""

    text: str
    files: list[str]
    context: SweepContext
    runs: list[LabelledRun]


def write_sweep_report(
    sweep_dir: Path,
    out_md: Path,
    noise_floor: float = noise.DEFAULT_NOISE_FLOOR,
    template: Path | None = None,
    cycle: Any = None,
) -> SweepReport:
    """The rendered markdown (the plots are written beside `out_md` now)."""
    context, runs = sweep_context(sweep_dir, out_md, noise_floor, cycle)
    text = render(context, template) if template is not None else render_sweep(context)
    files = [p["file"] for p in context["plots"]] + [p["file"] for p in context["figure_plots"]]
    return SweepReport(text, files, context, runs)


def render_sweep(context: SweepContext) -> str:
    """The packaged sweep template."""
    from evalkit.report.render import environment, md_safe

    return environment().get_template(TEMPLATE).render(**md_safe(dict(context)))  # as text, as report.md (#56)
