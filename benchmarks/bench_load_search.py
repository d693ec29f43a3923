"""How close `evalkit load --search concurrency` comes to the sim's true capacity, for several slot counts.

    python benchmarks/bench_load_search.py                    # slots 1 2 4 8 at --time-scale 4
    python benchmarks/bench_load_search.py --slots 2 6 --time-scale 2 --runs 3

For each slot count S the sim's model (evalkit/sim/engine.py) puts TTFT under the target for N <= S streams and
over it for N = S + 1 (queueing wait T/S by Little's law, T the service time of a full batch), so the true answer
is S; the script prints the derived bounds, what the search found, its steps and its wall time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from evalkit.load.workload import count_for
from evalkit.sim.launch import start_sim

PREFILL, DECODE, BATCH_DECODE = 2000.0, 100.0, 250.0
PROMPT, OUTPUT, TARGET = 20, 80, 0.2  # target in the sim's seconds


def combined_rate(b: int, slots: int) -> float:
    """R(b) as the engine defines it."""
    return DECODE if slots <= 1 else DECODE + (BATCH_DECODE - DECODE) * (min(b, slots) - 1) / (slots - 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--slots", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--time-scale", type=float, default=4.0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--requests", type=int, default=8)
    args = ap.parse_args()
    scale = args.time_scale
    print(
        f"target TTFT p99 <= {TARGET:g} s on the sim's clock ({TARGET / scale * 1000:.0f} ms at --time-scale "
        f"{scale:g}); prompt {PROMPT}, output ~{OUTPUT} tokens, {args.requests} requests x {args.runs} runs a point"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for slots in args.slots:
            flags = [
                "--time-scale",
                f"{scale:g}",
                "--max-batch",
                str(slots),
                "--prefill-rate",
                f"{PREFILL:g}",
                "--decode-rate",
                f"{DECODE:g}",
                "--batch-decode-rate",
                f"{BATCH_DECODE:g}",
            ]
            upper = slots * PROMPT / PREFILL + 2 * slots / combined_rate(slots, slots)
            shortest = min(2 * count_for(OUTPUT, i) - 1 for i in range(9))
            wait = shortest / combined_rate(slots, slots)
            with start_sim(flags) as sim:
                t0 = time.monotonic()
                r = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "evalkit",
                        "load",
                        "--base-url",
                        sim.base_url,
                        "--out",
                        tmp,
                        "--name",
                        f"s{slots}",
                        "--no-metrics",
                        "--search",
                        "concurrency",
                        "--slo",
                        f"ttft_p99_s<={TARGET / scale:g}",
                        "--slo",
                        "errors==0",
                        "--requests",
                        str(args.requests),
                        "--runs",
                        str(args.runs),
                        "--prompt-tokens",
                        str(PROMPT),
                        "--output-tokens",
                        str(OUTPUT),
                        "--search-max",
                        str(4 * slots),
                    ],
                    capture_output=True,
                    text=True,
                )
                wall = time.monotonic() - t0
            if r.returncode != 0:
                sys.stderr.write(r.stderr)
                return 1
            s = json.loads((Path(r.stdout.strip().splitlines()[-1]) / "summary.json").read_text())
            steps = " ".join(f"{p['load']:g}{'+' if p['meets_slo'] else '-'}" for p in s["points"])
            print(
                f"slots {slots}: true max {slots} (TTFT <= {upper:.3f} s at N=S, mean wait >= {wait:.3f} s at "
                f"N=S+1); found {s['max_concurrency_meeting_slo']}; points {steps}; "
                f"{len(s['client']['invalid_points'])} invalid; {wall:.1f} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
