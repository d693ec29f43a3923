"""One small bar chart per key figure across a sweep's points (the baseline's bar darker), beside the report."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt

from evalkit.report.context import FigurePlot
from evalkit.report.runs import LabelledRun
from evalkit.runs.summaries import FinishedRun, lookup
from evalkit.runs.sweepdir import PointRecord


@dataclass(frozen=True)
class KeyFigure:
    """A figure drawn across the points: its `<kind>.<path>` metric, title and which way is better."""

    metric: str
    title: str
    higher_is_better: bool


KEY_FIGURES = (
    KeyFigure("bench.prompts.code.tok_s", "bench: code decode tok/s", True),
    KeyFigure("bench.concurrent.combined_tok_s", "bench: two streams, combined tok/s", True),
    KeyFigure(
        "stress.metrics.short_insert_ttft_s.p95", "stress: short request during a long prefill, TTFT p95 (s)", False
    ),
    KeyFigure("stress.metrics.post_cancel_ttft_s.max", "stress: next request after a cancel, TTFT max (s)", False),
    KeyFigure("stress.metrics.long_prefill_s.p50", "stress: long prefill alone (s)", False),
    KeyFigure("stress.metrics.concurrent_combined_tok_s.p50", "stress: two generations, combined tok/s", True),
    KeyFigure("capability.total.correct", "capability: correct answers", True),
    KeyFigure("bench.gpu_telemetry.run.j_per_output_token", "bench: GPU energy per output token (J)", False),
)


def figure_values(per_point: list[tuple[PointRecord, list[LabelledRun]]], metric: str) -> list[tuple[str, float]]:
    """(point, value) for every point whose runs hold the metric (the first run of its kind at that point)."""
    out = []
    for rec, runs in per_point:
        by_kind: dict[str, FinishedRun] = {}
        for r in runs:
            by_kind.setdefault(r.kind, r.run)
        value = lookup(metric, by_kind)
        if value is not None:
            out.append((rec.name, value))
    return out


def figure_plots(
    per_point: list[tuple[PointRecord, list[LabelledRun]]], out_md: Path, baseline: str
) -> list[FigurePlot]:
    """Write one PNG per key figure that at least two points measured; their titles and file names."""
    made: list[FigurePlot] = []
    for fig in KEY_FIGURES:
        values = figure_values(per_point, fig.metric)
        if len(values) < 2:
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", fig.metric.lower()).strip("-")
        path = out_md.with_name(f"{out_md.stem}-sweep-{slug}.png")
        names = [n for n, _ in values]
        fig_, ax = plt.subplots(figsize=(max(3.5, 0.9 * len(values) + 1.5), 2.6))
        colors = ["#1f3b5c" if n == baseline else "#6f9fd8" for n in names]
        bars = ax.bar(range(len(values)), [v for _, v in values], color=colors)
        ax.bar_label(bars, labels=[f"{v:.3g}" for _, v in values], fontsize=7)
        ax.set_xticks(range(len(values)), names, rotation=20, ha="right", fontsize=7)
        ax.set_title(f"{fig.title} ({'higher' if fig.higher_is_better else 'lower'} is better)", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.margins(y=0.15)
        fig_.tight_layout()
        fig_.savefig(path, dpi=110)
        plt.close(fig_)
        made.append({"title": fig.title, "file": path.name, "metric": fig.metric})
    return made
