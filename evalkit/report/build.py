"""From run directories to the report's context: runs, sections of tables, and the plots beside the markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalkit.report import build_verdicts, noise, plots, tables
from evalkit.report.capacity_plot import latency_vs_load
from evalkit.report.context import PlotEntry, ReportContext
from evalkit.report.memory import memory_section
from evalkit.report.memory_plot import gpu_memory_plot
from evalkit.report.model_rule import ModelNames
from evalkit.report.runs import LabelledRun
from evalkit.report.sections import sections as report_sections
from evalkit.report.server_says import server_says_section
from evalkit.runs.bisect_log import BisectStep


def build_context(
    runs: list[LabelledRun],
    bisect_entries: list[BisectStep] | None,
    out_md: Path,
    noise_floor: float = noise.DEFAULT_NOISE_FLOOR,
    cycle: Any = None,
) -> ReportContext:
    """Everything a template needs; plots are written now, next to `out_md`, and referenced by file name."""
    by_kind: dict[str, list[LabelledRun]] = {}
    for r in runs:
        by_kind.setdefault(r.kind, []).append(r)
    sections = report_sections(by_kind, noise_floor)
    if bisect_entries:
        sections.append({"kind": "bisect", "heading": "Bisect", "tables": [tables.bisect_table(bisect_entries)]})
    stem = out_md.stem
    made: list[PlotEntry] = []
    if "stress" in by_kind:
        p = plots.stress_timeline(by_kind["stress"], out_md.with_name(f"{stem}-stress-timeline.png"), cycle)
        if p:
            made.append(
                {
                    "title": "One stress cycle, a lane per request: waiting, the server's prefill, decode, cancelled",
                    "file": p.name,
                }
            )
    memory = memory_section(runs, noise_floor)
    if memory:
        p = gpu_memory_plot(runs, out_md.with_name(f"{stem}-gpu-memory.png"))
        if p:
            made.append({"title": "GPU memory per card against time", "file": p.name})
    if "load" in by_kind:
        p = latency_vs_load(by_kind["load"], out_md.with_name(f"{stem}-load-latency.png"))
        if p:
            made.append({"title": "Time to first token against load per run", "file": p.name})
    p = plots.ttft_distributions(runs, out_md.with_name(f"{stem}-ttft.png"))
    if p:
        made.append(
            {
                "title": "Time to first token: a panel per time base, short requests apart from long prefills",
                "file": p.name,
            }
        )
    models = ModelNames([r.run.manifest for r in runs])
    return {
        "title": "evalkit report: " + " vs ".join(dict.fromkeys(r.label for r in runs)) if runs else "evalkit report",
        "runs": [
            {
                "label": r.label,
                "kind": r.kind,
                "path": str(r.run.path),
                "model": models.describe(i),
                "started": r.run.manifest.get("started"),
                "build_label": r.run.manifest.get("build_label"),
            }
            for i, r in enumerate(runs)
        ],
        "sections": sections,
        "tables": {
            t.key: t for ts in [*(s["tables"] for s in sections), [memory["table"]] if memory else []] for t in ts
        },
        "memory": memory,
        "server_says": server_says_section(runs),
        "plots": made,
        "summaries": {r.label: r.summary for r in runs},
        "answer": build_verdicts.context(runs, noise_floor),
    }
