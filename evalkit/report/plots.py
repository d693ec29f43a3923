"""PNG plots beside the report: one stress cycle as a timeline, and TTFT distributions per run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter

from evalkit.report.formatting import num
from evalkit.report.lanes import lanes, time_axis_words, time_scale
from evalkit.report.runs import LabelledRun
from evalkit.runs.schemas import TaggedRequestLine

WAIT_COLOR, DECODE_COLOR, CANCEL_COLOR = "#f2a541", "#3a6ea5", "#c0392b"
PREFILL_COLOR = "#7fb069"


def pick_cycle(runs: list[LabelledRun], wanted: Any = None) -> Any:
    """The cycle to draw: the one asked for, else the first cycle every stress run has."""
    if wanted is not None:
        return wanted
    common: set[Any] | None = None
    for r in runs:
        cycles = {line.cycle for line in r.requests() if line.cycle is not None}
        common = cycles if common is None else common & cycles
    if not common:
        return None
    # Cycle 0 holds the calibration requests, not a cycle of the scenario.
    return min((c for c in common if isinstance(c, int) and c > 0), default=min(common))


def stress_timeline(runs: list[LabelledRun], path: Path, cycle: Any = None) -> Path | None:
    """One subplot per stress run: a lane per request of the cycle, waiting (sent → the server's prefill start),
    prefill (the server's window, from its timings or log), decode (first token → done), cancelled; every request
    visible (a bar never narrower than half a percent of the axis, and a tick at its send), labels in words, the
    legend beside, the time base (real, or sim time and its factor) on each axis."""
    cycle = pick_cycle(runs, cycle)
    per_run = [(r, lanes(r, cycle)) for r in runs]
    per_run = [(r, ls) for r, ls in per_run if ls]
    if not per_run:
        return None
    height = sum(max(len(ls), 2) * 0.32 + 1.1 for _, ls in per_run)
    fig, axes = plt.subplots(len(per_run), 1, figsize=(12, max(3.0, height)), squeeze=False)
    for ax, (run, ls) in zip(axes[:, 0], per_run):
        span = max((x.done or x.first_token or x.sent) for x in ls) or 1.0
        least = span * 0.005
        for i, x in enumerate(ls):
            first = x.first_token if x.first_token is not None else (x.done if x.done is not None else x.sent)
            done = x.done if x.done is not None else first
            start = x.server_start if x.server_start is not None and x.sent <= x.server_start <= first else None
            wait_end = start if start is not None else first
            color = CANCEL_COLOR if x.cancelled and x.first_token is None and start is None else WAIT_COLOR
            ax.barh(i, max(wait_end - x.sent, least), left=x.sent, color=color, height=0.6)
            if start is not None:
                ax.barh(i, max(first - start, least), left=start, color=PREFILL_COLOR, height=0.6)
            if done > first or x.first_token is not None:
                ax.barh(
                    i,
                    max(done - first, least),
                    left=first,
                    color=CANCEL_COLOR if x.cancelled else DECODE_COLOR,
                    height=0.6,
                    hatch="//" if x.cancelled else None,
                )
            ax.plot([x.sent], [i], marker="|", color="black", markersize=9)
        ax.set_yticks(range(len(ls)))
        ax.set_yticklabels([f"{x.words}" for x in ls], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{run.label}: stress cycle {cycle}, {len(ls)} requests", fontsize=9)
        ax.set_xlabel(time_axis_words(run), fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in (WAIT_COLOR, PREFILL_COLOR, DECODE_COLOR, CANCEL_COLOR)]
    fig.legend(
        handles,
        ["sent → server starts (waiting)", "server's prefill (timings / log)", "first token → done", "cancelled"],
        loc="center left",
        bbox_to_anchor=(0.8, 0.5),
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def ttft_groups(runs: list[LabelledRun]) -> list[tuple[str, list[tuple[str, list[float]]]]]:
    """TTFT samples per panel, one time base and one kind of request each: real-time runs (bench, capability),
    then per stress time base its short requests and its long prefills apart."""
    panels: dict[str, list[tuple[str, list[float]]]] = {}
    for r in runs:
        ok = [
            (x, x.ttft_s)
            for x in r.requests()
            if x.status == "ok" and x.ttft_s is not None and x.ttft_s > 0 and x.scenario != "calibration"
        ]
        if r.kind == "stress":
            f = time_scale(r)
            base = "real time" if f == 1 else f"sim time, {f:g}× faster than real"
            keep: Callable[[TaggedRequestLine], bool]
            for name, keep in (
                ("stress, short requests", lambda x: x.role != "long"),
                ("stress, long prefills", lambda x: x.role == "long"),
            ):
                xs = sorted(t for x, t in ok if keep(x))
                if xs:
                    panels.setdefault(f"{name} ({base})", []).append((r.label, xs))
        else:
            xs = sorted(t for _, t in ok)
            if xs:
                panels.setdefault("bench and capability (real time)", []).append((f"{r.label} {r.kind}", xs))
    return list(panels.items())


def ttft_distributions(runs: list[LabelledRun], path: Path) -> Path | None:
    """Empirical CDF of time to first token, one panel per time base and kind of request (log scale, so a blocked
    tail stands out), legends beside each panel."""
    groups = ttft_groups(runs)
    if not groups:
        return None
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, 3.2 * len(groups)), squeeze=False)
    for ax, (title, series) in zip(axes[:, 0], groups):
        for name, xs in series:
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step(xs, ys, where="post", label=f"{name}, n={len(xs)}")
        ax.set_xscale("log")
        plain = FuncFormatter(lambda v, _pos: num(v, 2))  # 0.001, 2.01: never 10^-3 or 2×10^0
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda v, _pos: ""))
        ax.set_xlabel("time to first token, seconds (log scale)", fontsize=8)
        ax.set_ylabel("share of requests", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        ax.set_title(f"Time to first token: {title}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
