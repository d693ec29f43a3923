"""PNG plots beside the report: one stress cycle as a timeline, and TTFT distributions per run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt

from evalkit.report.runs import LabelledRun

WAIT_COLOR, DECODE_COLOR, CANCEL_COLOR = "#f2a541", "#3a6ea5", "#c0392b"


def _cycle_requests(run: LabelledRun, cycle: Any) -> list[dict[str, Any]]:
    lines = [r for r in run.requests() if r.get("cycle") == cycle and isinstance(r.get("t_sent"), (int, float))]
    return sorted(lines, key=lambda r: r["t_sent"])


def pick_cycle(runs: list[LabelledRun], wanted: Any = None) -> Any:
    """The cycle to draw: the one asked for, else the first cycle every stress run has."""
    if wanted is not None:
        return wanted
    common = None
    for r in runs:
        cycles = {line.get("cycle") for line in r.requests() if line.get("cycle") is not None}
        common = cycles if common is None else common & cycles
    return min(common) if common else None


def stress_timeline(runs: list[LabelledRun], path: Path, cycle: Any = None) -> Path | None:
    """One subplot per stress run: each request of the cycle a bar, sent→first token (waiting), →done (decoding)."""
    cycle = pick_cycle(runs, cycle)
    per_run = [(r, _cycle_requests(r, cycle)) for r in runs]
    per_run = [(r, reqs) for r, reqs in per_run if reqs]
    if not per_run:
        return None
    height = sum(max(len(reqs), 2) * 0.35 + 1.0 for _, reqs in per_run)
    fig, axes = plt.subplots(len(per_run), 1, figsize=(10, max(3.0, height)), squeeze=False, sharex=True)
    for ax, (run, reqs) in zip(axes[:, 0], per_run):
        t0 = reqs[0]["t_sent"]
        labels = []
        for i, r in enumerate(reqs):
            sent = r["t_sent"] - t0
            first = (r.get("t_first_token") or r.get("t_done") or r["t_sent"]) - t0
            done = (r.get("t_done") or r.get("t_first_token") or r["t_sent"]) - t0
            cancelled = r.get("status") == "cancelled"
            # A request cancelled before its first token waited all its life: show that wait as cancelled.
            wait_color = CANCEL_COLOR if cancelled and not r.get("t_first_token") else WAIT_COLOR
            ax.barh(i, max(first - sent, 1e-3), left=sent, color=wait_color, height=0.6)
            if done > first:
                ax.barh(
                    i,
                    done - first,
                    left=first,
                    color=CANCEL_COLOR if cancelled else DECODE_COLOR,
                    height=0.6,
                    hatch="//" if cancelled else None,
                )
            labels.append(f"{r.get('scenario', '?')} {r.get('role') or str(r.get('request_id', ''))[-6:]}")
        ax.set_yticks(range(len(reqs)))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(f"{run.label}: cycle {cycle}", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("seconds since the cycle's first request was sent")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in (WAIT_COLOR, DECODE_COLOR, CANCEL_COLOR)]
    fig.legend(
        handles, ["sent → first token", "first token → done", "cancelled"], loc="lower center", ncol=3, fontsize=8
    )
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def ttft_distributions(runs: list[LabelledRun], path: Path) -> Path | None:
    """Empirical CDF of every run's time to first token (log scale, so a blocked tail stands out)."""
    series = []
    for r in runs:
        xs = sorted(
            x["ttft_s"]
            for x in r.requests()
            if x.get("status", "ok") == "ok" and isinstance(x.get("ttft_s"), (int, float)) and x["ttft_s"] > 0
        )
        if xs:
            series.append((f"{r.label} ({r.kind})", xs))
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, xs in series:
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, where="post", label=f"{name}, n={len(xs)}")
    ax.set_xscale("log")
    ax.set_xlabel("time to first token, s (log)")
    ax.set_ylabel("fraction of requests")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("TTFT distribution per run")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
