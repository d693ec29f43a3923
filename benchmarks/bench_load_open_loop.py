"""Open-loop rate fidelity of `evalkit load`: a long constant-rate run against `evalkit sim`, achieved vs requested.

    python benchmarks/bench_load_open_loop.py                 # 10 minutes at 5 requests/s (the issue's acceptance)
    python benchmarks/bench_load_open_loop.py --minutes 1 --rate 8 --arrivals poisson

Prints the requested, scheduled and achieved rate (client send stamps and the sim's own arrival stamps), the
achieved rate minute by minute (a client that drifts, as peers' did, shows a falling rate here), and how late
the client sent against the plan. The sim serves with enough slots that the queue stays short, so the client,
not the server, is what is measured.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from evalkit.sim.launch import start_sim
from evalkit.stats import percentile


def _rate(times: list[float]) -> float | None:
    times = sorted(times)
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=5.0)
    ap.add_argument("--arrivals", choices=("constant", "poisson"), default="constant")
    ap.add_argument("--output-tokens", type=int, default=32)
    args = ap.parse_args()
    sim_flags = ["--max-batch", "32", "--decode-rate", "200", "--batch-decode-rate", "4000", "--prefill-rate", "20000"]
    with tempfile.TemporaryDirectory() as tmp, start_sim(sim_flags) as sim:
        cmd = [
            sys.executable,
            "-m",
            "evalkit",
            "load",
            "--base-url",
            sim.base_url,
            "--out",
            tmp,
            "--name",
            "open",
            "--no-metrics",
            "--rate",
            f"{args.rate:g}",
            "--arrivals",
            args.arrivals,
            "--duration",
            f"{args.minutes * 60:g}",
            "--prompt-tokens",
            "128",
            "--output-tokens",
            str(args.output_tokens),
        ]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr)
            return 1
        run = Path(r.stdout.strip().splitlines()[-1])
        summary = json.loads((run / "summary.json").read_text())
        lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
        measured = [x for x in lines if x["phase"] == "measured"]
        ids = {x["request_id"] for x in measured}
        arrived = [e["arrived"] for e in sim.events(wait_s=30) if e["request_id"] in ids]
    m: dict[str, Any] = summary["points"][0]["metrics"]
    print(
        f"open loop, {args.arrivals} arrivals, {args.minutes:g} min, {len(measured)} measured requests "
        f"({m['errors']} errors, {m['wrong_answers']} wrong answers)"
    )
    print(f"  requested   {args.rate:.4f}/s")
    print(f"  scheduled   {m['scheduled_rate']:.4f}/s")
    ach, srv = m["achieved_rate"], _rate(arrived)
    print(
        f"  achieved    {ach:.4f}/s client send stamps ({(ach / args.rate - 1) * 100:+.3f}% of requested, "
        f"{(ach / m['scheduled_rate'] - 1) * 100:+.3f}% of scheduled)"
    )
    if srv:
        print(f"  achieved    {srv:.4f}/s sim arrival stamps ({(srv / args.rate - 1) * 100:+.3f}% of requested)")
    t0 = min(x["scheduled_send"] for x in measured)
    minutes = int(args.minutes) or 1
    per_min = []
    for k in range(minutes):
        sent = [x["t_sent"] for x in measured if t0 + 60 * k <= x["scheduled_send"] < t0 + 60 * (k + 1)]
        per_min.append(_rate(sent))
    print("  per minute  " + " ".join("-" if v is None else f"{v:.3f}" for v in per_min))
    late = [x["send_lateness_s"] * 1000 for x in measured]
    print(
        "  lateness ms " + "  ".join(f"p{q} {percentile(late, q):.2f}" for q in (50, 95, 99)) + f"  max {max(late):.2f}"
    )
    print(f"  valid point: {summary['points'][0]['valid']} {summary['points'][0]['per_repeat'][0]['invalid_reasons']}")
    print(f"  ttft p50 {m['ttft_s']['p50'] * 1000:.1f} ms, p99 {m['ttft_s']['p99'] * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
