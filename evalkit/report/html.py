"""`report.html` beside `report.md`, from the same context: one file that opens offline (Plotly's bundle, the styles
and the few lines of filter script inlined), every table plain HTML that reads without JavaScript, and with it the
interactive figures: a lane per request of each stress cycle, TTFT distributions per build, load curves with the
targets, and the capability questions that changed, filterable, with both answers and their extraction rule and
reasoning folded.

Plotly is a default dependency (not in the light set): without it `evalkit report` writes report.md alone and says
so in one line (`plotly_missing`).
"""

from __future__ import annotations

import base64
import functools
import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2

from evalkit.report import html_figures, lanes
from evalkit.report.capability import _modes, comparability, question_changes
from evalkit.report.context import FlipEntry, FlipSide, ReportContext, TimelineEntry
from evalkit.report.plots import pick_cycle
from evalkit.report.runs import LabelledRun
from evalkit.runs.schemas import GradedLine

HTML_TEMPLATE = "report.html.j2"
MAX_BYTES = 5_000_000  # the page's own limit: one file, small enough to mail


def plotly_missing() -> str | None:
    """None when plotly imports; else the one line `evalkit report` prints instead of writing report.html."""
    try:
        import plotly  # noqa: F401  # only whether it imports
    except ImportError:
        return "report.html skipped: plotly is not installed (pip install plotly, or the default install of evalkit)"
    return None


def _div(fig: Any, div_id: str) -> str:
    """A figure's place on the page and its JSON beside it; the loader draws it once Plotly is unpacked."""
    spec = str(fig.to_json()).replace("</", "<\\/")
    return (
        f'<div class="plot" id="{div_id}"></div>'
        f'<script type="application/json" class="figure" data-target="{div_id}">{spec}</script>'
    )


@functools.cache  # a pure function of the installed plotly: compressed once a process (0.4 s)
def plotly_bundle() -> str:
    """Plotly's own bundle, gzip-compressed (mtime 0: the same bytes every time) and base64-encoded: 4.8 MB of
    script in under 2 MB of page, unpacked in the browser (DecompressionStream) with no network."""
    from plotly.offline import get_plotlyjs

    return base64.b64encode(gzip.compress(get_plotlyjs().encode("utf-8"), 9, mtime=0)).decode("ascii")


def _timelines(runs: list[LabelledRun], wanted: Any) -> list[TimelineEntry]:
    stress = [r for r in runs if r.kind == "stress"]
    out: list[TimelineEntry] = []
    first = pick_cycle(stress, wanted) if stress else None
    for k, r in enumerate(stress):
        cycles = sorted({x.cycle for x in r.requests() if x.cycle is not None and x.cycle > 0})
        for c in cycles:
            ls = lanes.lanes(r, c)
            if not ls:
                continue
            fig = html_figures.timeline(r, c, ls)
            out.append(
                {
                    "label": r.label,
                    "cycle": c,
                    "first": c == first,
                    "id": f"timeline-{k}-{c}",
                    "div": _div(fig, f"timeline-{k}-{c}-plot"),
                    "lanes": [
                        {"name": html_figures.lane_name(i, x), "lane": x, "phases": html_figures._segments(x)}
                        for i, x in enumerate(ls)
                    ],
                    "axis": lanes.time_axis_words(r),
                }
            )
    return out


def _side(g: GradedLine | None) -> FlipSide:
    """One run's answer to a changed question, for the page (every key None where the run has no line)."""
    if g is None:
        return {"extracted": None, "outcome": None, "rule": None, "why": None, "content": None, "reasoning": None}
    return {
        "extracted": g.extracted,
        "outcome": g.outcome,
        "rule": g.rule,
        "why": g.why,
        "content": g.content,
        "reasoning": g.reasoning,
    }


def _flips(runs: list[LabelledRun]) -> list[FlipEntry]:
    out: list[FlipEntry] = []
    for mode, group in _modes([r for r in runs if r.kind == "capability"]).items():
        base = group[0]
        base_lines = {g.id: g for g in base.graded()}
        for r in group[1:]:
            lines = {g.id: g for g in r.graded()}
            why = comparability(base, r)
            for c in question_changes(base, r):
                out.append(
                    {
                        "mode": mode,
                        "id": c.qid,
                        "dataset": c.dataset,
                        "change": "right→wrong" if c.change == "right_to_wrong" else "wrong→right",
                        "before_label": base.label,
                        "after_label": r.label,
                        "before": _side(base_lines.get(c.qid)),
                        "after": _side(lines.get(c.qid)),
                        "comparable": not why,
                    }
                )
    return out


def _environment() -> jinja2.Environment:
    from evalkit.report import md_html
    from evalkit.report.render import environment

    env = environment()
    env.autoescape = True
    env.filters["md"] = md_html.inline  # the report's markdown (`code`, **bold**) as HTML, the rest escaped
    env.filters["md_block"] = md_html.block  # a model's answer: its fenced code as code blocks
    env.tests["numeric_cell"] = md_html.numeric_cell  # a figure (right-aligned), not words or code
    return env


BUNDLE_SLOT = "@@evalkit-plotly-bundle@@"


def render_html(
    context: ReportContext,
    runs: list[LabelledRun],
    cycle: Any = None,
    scrub_text: Callable[[str], str] = lambda text: text,
) -> str:
    """The page as one string (Plotly's bundle inlined once, compressed). `scrub_text` (evalkit.redact.scrub with
    the run's key) passes over the page before the bundle goes in: the bundle is not server text, and a short key
    could occur in 2 MB of base64 by chance."""
    dists = [{"title": t, "div": _div(f, f"ttft-{i}")} for i, (t, f) in enumerate(html_figures.distributions(runs))]
    load = html_figures.load_curves([r for r in runs if r.kind == "load"])
    page = {
        "timelines": _timelines(runs, cycle),
        "distributions": dists,
        "load_curve": _div(load, "load-curve") if load is not None else None,
        "flips": _flips(runs),
        "plotly_gz": BUNDLE_SLOT,
    }
    text = scrub_text(_environment().get_template(HTML_TEMPLATE).render(**context, page=page))
    return text.replace(BUNDLE_SLOT, plotly_bundle(), 1)


def write_html(
    context: ReportContext,
    runs: list[LabelledRun],
    path: Path,
    cycle: Any = None,
    scrub_text: Callable[[str], str] = lambda text: text,
) -> Path:
    """Write report.html (scrubbed as the markdown is, by `scrub_text`)."""
    path.write_text(render_html(context, runs, cycle, scrub_text), encoding="utf-8")
    return path
