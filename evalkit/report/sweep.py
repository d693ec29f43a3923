"""`evalkit report SWEEP_DIR`: the usual tables with one column per sweep point (the baseline point first, so every
delta and beyond-noise mark is against it), a table of the points and how each ended, and one small plot per key
figure across the points. Tables come from the same builders as any report (`build.build_context`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.report import noise
from evalkit.report.build import build_context
from evalkit.report.context import SweepContext
from evalkit.report.render import render
from evalkit.report.runs import LabelledRun
from evalkit.report.sweep_plots import KEY_FIGURES, figure_plots
from evalkit.report.tables import Table
from evalkit.runs.summaries import load_runs
from evalkit.runs.sweepdir import DONE, PointRecord, SweepState, finished_runs, read_state

TEMPLATE = "sweep.md.j2"


def ordered_points(state: SweepState) -> list[PointRecord]:
    """The baseline point first, then the others in sweep order."""
    base = [p for p in state.points if p.name == state.baseline]
    return base + [p for p in state.points if p.name != state.baseline]


def point_runs(sweep_dir: Path, state: SweepState) -> list[tuple[PointRecord, list[LabelledRun]]]:
    """Each point (baseline first) with its finished runs, labelled by the point (and the run, when a point has two
    runs of one kind)."""
    out = []
    for rec in ordered_points(state):
        loaded = load_runs(finished_runs(sweep_dir, rec))
        kinds = [r.kind for r in loaded]
        labelled = [
            LabelledRun(rec.name if kinds.count(r.kind) == 1 else f"{rec.name} ({r.path.name})", r) for r in loaded
        ]
        out.append((rec, labelled))
    return out


def points_table(state: SweepState) -> Table:
    """One column per point: its parameters, how it ended and the server's exact command."""
    recs = ordered_points(state)
    keys: list[str] = []
    for r in recs:
        keys += [k for k in r.params if k not in keys]
    rows: list[tuple[str, list[str]]] = [(k, [r.params.get(k, "–") or "(empty)" for r in recs]) for k in keys]
    rows.append(("status", [r.status if r.status == DONE else f"{r.status.upper()}: {r.failure or ''}" for r in recs]))
    rows.append(("runs", [", ".join(c.name for c in r.commands if c.exit_code is not None) or "–" for r in recs]))
    notes = [f"Baseline: {state.baseline}; every delta and mark below is against it."]
    notes += [f"{r.name}: `{' '.join(r.server_command)}`" for r in recs if r.server_command]
    return Table("sweep_points", "Points", [r.name for r in recs], rows, notes, row_header="parameter")


def sweep_context(
    sweep_dir: Path, out_md: Path, noise_floor: float = noise.DEFAULT_NOISE_FLOOR, cycle: Any = None
) -> tuple[SweepContext, list[LabelledRun]]:
    """The report context of a sweep (`build_context` over every point's runs, plus the points and their plots) and
    the labelled runs it was built from."""
    state = read_state(sweep_dir)
    per_point = point_runs(sweep_dir, state)
    runs = [r for _, rs in per_point for r in rs]
    report = build_context(runs, None, out_md, noise_floor, cycle)
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
    }
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
    from evalkit.report.render import environment

    return environment().get_template(TEMPLATE).render(**context)
