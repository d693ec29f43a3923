"""evalkit stress's own overhead: one cycle against `evalkit sim` at high time-scale, the run's wall time minus the
time the sim was busy (the union of its requests' arrived→done intervals).

    /work/venv/bin/python benchmarks/bench_stress_overhead.py [--time-scale 50] [--profile dual-2080ti-after]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalkit.sim.launch import start_sim


def busy_time(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of intervals."""
    total, end = 0.0, float("-inf")
    for s, e in sorted(intervals):
        if s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--time-scale", default="50")
    ap.add_argument("--profile", default="dual-2080ti-after")
    ap.add_argument("--long-tokens", default="54000")
    args = ap.parse_args()
    with (
        tempfile.TemporaryDirectory() as out,
        start_sim(["--profile", args.profile, "--time-scale", args.time_scale]) as sim,
    ):
        t0 = time.monotonic()
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalkit",
                "stress",
                "--base-url",
                sim.base_url,
                "--out",
                out,
                "--name",
                "bench",
                "--cycles",
                "1",
                "--seed",
                "42",
                "--time-scale",
                args.time_scale,
                "--long-tokens",
                args.long_tokens,
                "--no-progress",
            ],
            capture_output=True,
            text=True,
        )
        process_wall = time.monotonic() - t0
        if p.returncode != 0:
            sys.exit(p.stderr)
        events = sim.events()
        lines = [json.loads(x) for x in (Path(out) / "bench" / "requests.jsonl").read_text().splitlines()]
    stress = [x for x in lines if x.get("scenario") != "calibration"]
    run_wall = max(x["t_done"] for x in stress) - min(x["t_sent"] for x in stress)
    busy = busy_time([(e["arrived"], e["done"]) for e in events if e.get("done")])
    lateness = sorted(x["t_sent"] - x["t_planned"] for x in stress)
    print(f"profile {args.profile}, time-scale {args.time_scale}, one cycle, {len(stress)} requests")
    print(f"process wall time (start-up, tokenizing, cycle, summary): {process_wall:.3f} s")
    print(f"cycle wall time (first send to last done):                 {run_wall:.3f} s")
    print(f"sim busy time (union of arrived->done):                     {busy:.3f} s")
    print(
        f"evalkit overhead in the cycle (wall - busy):                {run_wall - busy:.3f} s "
        f"({(run_wall - busy) / len(stress) * 1000:.1f} ms a request)"
    )
    print(f"send lateness: median {lateness[len(lateness) // 2] * 1000:.2f} ms, max {lateness[-1] * 1000:.2f} ms")


if __name__ == "__main__":
    main()
