"""The PNG of latency against load: TTFT p50 and p99 at every load point, one line per run, targets drawn in."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt

from evalkit.report.runs import LabelledRun


def latency_vs_load(runs: list[LabelledRun], path: Path) -> Path | None:
    """TTFT against load per load run (solid p99, dashed p50); None when no run has load points."""
    runs = [r for r in runs if r.summary.get("points")]
    if not runs:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, r in enumerate(runs):
        pts = sorted(r.summary["points"], key=lambda p: p["load"])
        loads = [p["load"] for p in pts]
        color = f"C{i}"
        p99 = [p["metrics"]["ttft_s"]["p99"] for p in pts]
        p50 = [p["metrics"]["ttft_s"]["p50"] for p in pts]
        ax.plot(loads, p99, "o-", color=color, label=f"{r.label} TTFT p99")
        ax.plot(loads, p50, "o--", color=color, alpha=0.6, label=f"{r.label} TTFT p50")
        best = r.summary.get("max_load_meeting_slo")
        if best is not None:
            ax.axvline(best, color=color, linestyle=":", alpha=0.8)
    for t in runs[0].summary.get("slo") or []:
        if t.get("metric") == "ttft_s" and t.get("stat") in ("p50", "p99", "p95", "p90", "max"):
            # `scale` turns the stored seconds into the target's unit; the axis is in seconds.
            ax.axhline(t["limit"] / t.get("scale", 1.0), color="grey", linestyle="-.", label=f"target {t['slo']}")
    mode = runs[0].summary.get("mode")
    ax.set_xlabel("concurrency (streams)" if mode == "concurrency" else "offered rate (requests/s)")
    ax.set_ylabel("time to first token (s)")
    ax.set_title("Latency against load (dotted: largest load meeting the targets)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
