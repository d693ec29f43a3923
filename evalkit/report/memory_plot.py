"""PNG of GPU memory against time, one line per card and one panel per run, cycle starts marked."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt

from evalkit.report.memory import column_name, gpu_samples
from evalkit.report.runs import LabelledRun


def gpu_memory_plot(runs: list[LabelledRun], path: Path) -> Path | None:
    """Used MiB per card over each run's seconds; dotted lines where a stress cycle starts. None without samples."""
    per_run = [(r, sorted(gpu_samples(r), key=lambda s: s["t"])) for r in runs]
    per_run = [(r, s) for r, s in per_run if s]
    if not per_run:
        return None
    fig, axes = plt.subplots(len(per_run), 1, figsize=(10, 2.6 * len(per_run) + 0.6), squeeze=False)
    for ax, (run, samples) in zip(axes[:, 0], per_run):
        t0 = samples[0]["t"]
        for gpu in sorted({int(s["gpu"]) for s in samples}):
            mine = [s for s in samples if int(s["gpu"]) == gpu]
            name = next((s["name"] for s in reversed(mine) if s.get("name")), None)
            ax.plot(
                [s["t"] - t0 for s in mine],
                [s["used_mib"] for s in mine],
                marker=".",
                markersize=3,
                linewidth=1.2,
                label=f"GPU {gpu}" + (f" ({name})" if name else ""),
            )
        starts: dict[int, float] = {}
        for s in samples:
            c = int(s.get("cycle") or 0)
            if c >= 1:
                starts.setdefault(c, s["t"] - t0)
        for c, x in starts.items():
            ax.axvline(x, color="grey", linestyle=":", linewidth=0.8)
            ax.annotate(
                f"c{c}", (x, 1.0), xycoords=("data", "axes fraction"), fontsize=6, color="grey", va="top", ha="left"
            )
        ax.set_title(column_name(run), fontsize=9)  # as the table names the run
        ax.set_ylabel("used MiB")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[-1, 0].set_xlabel("seconds since the run's first sample")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
