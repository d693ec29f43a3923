"""Send-time fidelity of `evalkit load --trace`: a synthetic Mooncake trace at 200 requests/s against `evalkit sim`.

    python benchmarks/bench_trace_replay.py                     # 10 s at 200 requests/s (issue 31's acceptance)
    python benchmarks/bench_trace_replay.py --rate 400 --seconds 5
    python benchmarks/bench_trace_replay.py --pin 8,9,10           # sim, client and floor on cores of their own

Prints how far each send was from its scheduled time (client stamps against the trace's timeline: p50, p99, max
and the share within 5 ms), how late the sim saw them arrive, and the prefix-cache hit rate the client read from
the sim's answers (`timings.cache_n`) beside the sim's own truth (/sim/events). The sim serves with many slots
and a fast engine so the queue stays short: the client is what is measured. Beside it, the floor of this machine:
a process doing nothing but waking on the same 200/s timeline (uvloop sleeps), run at the same time, and how late
its wake-ups are; on a busy box the floor shows the same misses, and they are the box's, not the replay's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from evalkit.eventloop import fast_loop
from evalkit.sim.launch import start_sim
from evalkit.stats import percentile


def write_trace(path: Path, rate: float, seconds: float, block: int) -> int:
    """Five shared three-block prefixes, each request with one block of its own; returns the request count."""
    rng = random.Random(31)
    n = int(rate * seconds)
    with path.open("w") as fh:
        for i in range(n):
            ids = [100 * (i % 5) + j for j in range(3)] + [10_000 + i]
            line = {"timestamp": i * 1000 / rate, "input_length": 3 * block + 24 + rng.randint(8, 30)}
            fh.write(json.dumps({**line, "output_length": 3, "hash_ids": ids}) + "\n")
    return n


def wake_floor(rate: float, seconds: float) -> None:
    """Print how late plain wake-ups on a `rate`/s absolute timeline are (ms), one JSON list."""
    import asyncio
    import time

    async def go() -> list[float]:
        late = []
        start = time.perf_counter() + 0.05
        for i in range(int(rate * seconds)):
            at = start + i / rate
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            late.append((time.perf_counter() - at) * 1000)
        return late

    with fast_loop():
        print(json.dumps(asyncio.run(go())))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--floor", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--pin",
        metavar="SIM,CLIENT,FLOOR",
        help="cores for the sim, the replaying client and the floor process, one each (a quiet machine's figure)",
    )
    args = ap.parse_args()
    if args.floor:
        wake_floor(args.rate, args.seconds)
        return 0
    block = 16
    sim_flags = [
        "--max-batch",
        "64",
        "--decode-rate",
        "2000",
        "--batch-decode-rate",
        "40000",
        "--prefill-rate",
        "200000",
        "--prefix-cache-blocks",
        "100000",
        "--prefix-block-tokens",
        str(block),
    ]
    pins = [{int(c)} for c in args.pin.split(",")] if args.pin else []
    if pins and len(pins) != 3:
        ap.error("--pin takes three cores: SIM,CLIENT,FLOOR")
    with tempfile.TemporaryDirectory() as tmp, start_sim(sim_flags) as sim:
        if pins:
            os.sched_setaffinity(sim.proc.pid, pins[0])
            print(f"pinned: sim on core {min(pins[0])}, client on {min(pins[1])}, floor on {min(pins[2])}")
        trace = Path(tmp) / "trace.jsonl"
        n = write_trace(trace, args.rate, args.seconds, block)
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
            "trace",
            "--no-metrics",
            "--trace",
            str(trace),
            "--trace-block-tokens",
            str(block),
            "--token-scale",
            "1",
        ]
        floor_cmd = [sys.executable, __file__, "--floor", "--rate", f"{args.rate:g}", "--seconds", f"{args.seconds:g}"]
        floor = subprocess.Popen(floor_cmd, stdout=subprocess.PIPE, text=True)
        load = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if pins:  # before either has read its trace or started its timeline
            os.sched_setaffinity(floor.pid, pins[2])
            os.sched_setaffinity(load.pid, pins[1])
        out, err_text = load.communicate(timeout=args.seconds * 4 + 120)
        proc = subprocess.CompletedProcess(cmd, load.returncode, out, err_text)
        floor_late = sorted(json.loads(floor.communicate(timeout=args.seconds * 2 + 60)[0]))
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr[-3000:])
            return 1
        run = Path(tmp) / "trace"
        lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
        summary = json.loads((run / "summary.json").read_text())
        events = {e["request_id"]: e for e in sim.events()}
    err = sorted(abs(x["send_lateness_s"]) * 1000 for x in lines)
    arrive = sorted((events[x["request_id"]]["arrived"] - x["scheduled_send"]) * 1000 for x in lines)
    mine = [events[x["request_id"]] for x in lines]  # not the preflight's probes
    truth = sum(e["cached_tokens"] for e in mine) / sum(e["prompt_tokens"] for e in mine)
    print(f"trace replay: {len(lines)} of {n} requests at {args.rate:g}/s for {args.seconds:g} s")
    print(
        f"send error ms: p50 {percentile(err, 50):.3f}  p99 {percentile(err, 99):.3f}  max {err[-1]:.3f}  "
        f"within 5 ms {sum(e <= 5 for e in err) / len(err) * 100:.2f}%"
    )
    print(
        f"sim arrival after schedule ms: p50 {percentile(arrive, 50):.3f}  p99 {percentile(arrive, 99):.3f}  "
        f"max {arrive[-1]:.3f}"
    )
    fl = floor_late
    print(
        f"floor (bare wake-ups, same timeline, same time) ms: p50 {percentile(fl, 50):.3f}  "
        f"p99 {percentile(fl, 99):.3f}  max {fl[-1]:.3f}  within 5 ms {sum(e <= 5 for e in fl) / len(fl) * 100:.2f}%"
    )
    hit = summary["trace"]["prefix_cache"]["hit_rate"]
    print(f"prefix-cache hit rate: evalkit {hit:.6f}, sim truth {truth:.6f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
