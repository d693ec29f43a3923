"""The HTML page's interactive figures (Plotly): per stress cycle a lane per request, TTFT distributions per build
and time base, load curves with the targets drawn in. Each returns a `plotly.graph_objects.Figure` or None.

Plotly because its whole bundle inlines into one file that opens offline (no CDN, no server), it is well kept, and
its hover, zoom and legend toggling need no code of ours; the page inlines the bundle once (html.py).
"""

from __future__ import annotations

from typing import Any

from evalkit.report.formatting import seconds
from evalkit.report.lanes import Lane, time_axis_words
from evalkit.report.plots import CANCEL_COLOR, DECODE_COLOR, PREFILL_COLOR, WAIT_COLOR, ttft_groups
from evalkit.report.runs import LabelledRun

PHASES = (
    ("waiting", "sent → server starts (waiting)", WAIT_COLOR),
    ("prefill", "server's prefill (timings / log)", PREFILL_COLOR),
    ("decode", "first token → done (decode)", DECODE_COLOR),
    ("cancelled", "cancelled", CANCEL_COLOR),
)


def lane_name(i: int, lane: Lane) -> str:
    """The y label of a lane: its place in the cycle and its part in words (unique within the cycle)."""
    return f"{i + 1}. {lane.words}"


def _segments(lane: Lane) -> list[tuple[str, float, float]]:
    first = lane.first_token if lane.first_token is not None else (lane.done if lane.done is not None else lane.sent)
    done = lane.done if lane.done is not None else first
    start = lane.server_start if lane.server_start is not None and lane.sent <= lane.server_start <= first else None
    segs: list[tuple[str, float, float]] = []
    wait_phase = "cancelled" if lane.cancelled and lane.first_token is None and start is None else "waiting"
    segs.append((wait_phase, lane.sent, start if start is not None else first))
    if start is not None:
        segs.append(("cancelled" if lane.cancelled and lane.first_token is None else "prefill", start, first))
    if lane.first_token is not None:
        segs.append(("cancelled" if lane.cancelled else "decode", first, done))
    return segs


def _hover(lane: Lane) -> str:
    parts = [
        lane.words,
        f"request {lane.request_id}",
        f"sent at {seconds(lane.sent)}",
        f"first token {seconds(lane.ttft_s)} after sending" if lane.ttft_s is not None else "no first token",
    ]
    if lane.server_start is not None:
        parts.append(f"server started its prefill at {seconds(lane.server_start)} ({lane.evidence})")
    if lane.prefill_s is not None:
        parts.append(f"server's prefill {seconds(lane.prefill_s)}")
    if lane.done is not None:
        parts.append(("cancelled" if lane.cancelled else "done") + f" at {seconds(lane.done)}")
    if lane.completion_tokens:
        parts.append(f"{lane.completion_tokens} tokens")
    return "<br>".join(parts)


def timeline(run: LabelledRun, cycle: Any, ls: list[Lane]) -> Any:
    """A lane per request of the cycle; every segment at least half a percent of the axis wide, so none hides."""
    import plotly.graph_objects as go

    names = [lane_name(i, x) for i, x in enumerate(ls)]
    span = max((x.done or x.first_token or x.sent) for x in ls) or 1.0
    least = span * 0.005
    fig = go.Figure()
    for phase, words, color in PHASES:
        ys, bases, widths, hovers = [], [], [], []
        for name, x in zip(names, ls):
            for p, a, b in _segments(x):
                if p == phase:
                    ys.append(name)
                    bases.append(a)
                    widths.append(max(b - a, least))
                    hovers.append(_hover(x))
        if ys:
            fig.add_trace(
                go.Bar(
                    y=ys,
                    x=widths,
                    base=bases,
                    orientation="h",
                    name=words,
                    marker_color=color,
                    hovertext=hovers,
                    hoverinfo="text",
                )
            )
    fig.add_trace(
        go.Scatter(
            y=names,
            x=[x.sent for x in ls],
            mode="markers",
            marker={"symbol": "line-ns-open", "size": 12, "color": "black"},
            name="sent",
            hovertext=[_hover(x) for x in ls],
            hoverinfo="text",
        )
    )
    firsts = [(n, x) for n, x in zip(names, ls) if x.first_token is not None]
    if firsts:
        fig.add_trace(
            go.Scatter(
                y=[n for n, _ in firsts],
                x=[x.first_token for _, x in firsts],
                mode="markers",
                marker={"symbol": "diamond", "size": 7, "color": "black"},
                name="first token",
                hovertext=[_hover(x) for _, x in firsts],
                hoverinfo="text",
            )
        )
    fig.update_layout(
        barmode="overlay",
        title=f"{run.label}: stress cycle {cycle}, {len(ls)} requests",
        xaxis_title=time_axis_words(run),
        yaxis={"autorange": "reversed", "type": "category", "categoryorder": "array", "categoryarray": names},
        height=140 + 26 * len(ls),
        margin={"l": 300, "r": 20, "t": 50, "b": 50},
        legend={"orientation": "v", "x": 1.02, "y": 1},
    )
    return fig


def distributions(runs: list[LabelledRun]) -> list[tuple[str, Any]]:
    """One CDF figure per time base and kind of request, a line per build."""
    import plotly.graph_objects as go

    out = []
    for title, series in ttft_groups(runs):
        fig = go.Figure()
        for name, xs in series:
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[(i + 1) / len(xs) for i in range(len(xs))],
                    mode="lines+markers",
                    line={"shape": "hv"},
                    name=f"{name}, n={len(xs)}",
                )
            )
        fig.update_layout(
            title=f"Time to first token: {title}",
            xaxis={"type": "log", "title": "time to first token, seconds (log scale)"},
            yaxis={"title": "share of requests", "range": [0, 1.02]},
            height=360,
            legend={"x": 1.02, "y": 1},
        )
        out.append((title, fig))
    return out


def load_curves(runs: list[LabelledRun]) -> Any:
    """TTFT p50 and p99 against load per load run, each target a horizontal line, each maximum a vertical one."""
    import plotly.graph_objects as go

    runs = [r for r in runs if r.summary.get("points")]
    if not runs:
        return None
    import plotly.colors

    palette = plotly.colors.qualitative.Plotly
    fig = go.Figure()
    for i, r in enumerate(runs):
        pts = sorted(r.summary["points"], key=lambda p: p["load"])
        loads = [p["load"] for p in pts]
        for stat, dash in (("p99", "solid"), ("p50", "dash")):
            fig.add_trace(
                go.Scatter(
                    x=loads,
                    y=[p["metrics"]["ttft_s"][stat] for p in pts],
                    mode="lines+markers",
                    line={"dash": dash, "color": palette[i % len(palette)]},
                    name=f"{r.label} TTFT {stat}",
                )
            )
        best = r.summary.get("max_load_meeting_slo")
        if best is not None:
            fig.add_vline(x=best, line_dash="dot", annotation_text=f"{r.label}: largest load meeting the targets")
    for t in runs[0].summary.get("slo") or []:
        if t.get("metric") == "ttft_s":
            fig.add_hline(y=t["limit"] / t.get("scale", 1.0), line_dash="dashdot", annotation_text=f"target {t['slo']}")
    mode = runs[0].summary.get("mode")
    fig.update_layout(
        title="Latency against load",
        xaxis_title="concurrency (streams)" if mode == "concurrency" else "offered rate (requests/s)",
        yaxis_title="time to first token (s)",
        height=420,
        legend={"x": 1.02, "y": 1},
    )
    return fig
