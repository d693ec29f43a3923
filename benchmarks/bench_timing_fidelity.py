"""Timing fidelity: how far evalkit's client-side TTFT is from the server's own, against `evalkit sim`.

200 requests at concurrency 8 (after a warm-up that opens the pooled connections). For each request the gap is
evalkit's TTFT (ChatClient: first text chunk - sent) minus the sim's `first_token - arrived`, i.e. the time spent
getting the request to the server plus getting the first token back, both through evalkit's own HTTP transport
(`evalkit/client/http_stream.py`). Prints p50, p99 and max of the gap and of its two halves. Target: p99 under 5 ms on a
2-core machine. `benchmarks/bench_client_load.py` asks the same question at 1-512 streams, with CPU per chunk.

    python benchmarks/bench_timing_fidelity.py [--requests 200] [--concurrency 8] [--sim-flag=--time-scale=2 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.eventloop import fast_loop
from evalkit.sim.launch import start_sim
from evalkit.stats import percentile


def _row(name: str, values_s: list[float]) -> str:
    ms = [v * 1000 for v in values_s]
    return (
        f"{name:<34} p50 {percentile(ms, 50):7.3f} ms   p99 {percentile(ms, 99):7.3f} ms   "
        f"max {max(ms):7.3f} ms   n {len(ms)}"
    )


def _length(i: int, max_tokens: int, uniform: bool) -> int:
    # Real requests differ in length. Identical ones finish together and the next batch of requests arrives at
    # the single-threaded sim all at once, where the last of a burst is stamped `arrived` only after the sim
    # parsed the others (~0.5 ms each): a tail of the sim's own stamping, not of the client's.
    return max_tokens if uniform else max_tokens // 2 + (i * 7919) % max_tokens


async def _measure(base_url: str, n: int, concurrency: int, max_tokens: int, uniform: bool) -> list:
    sem = asyncio.Semaphore(concurrency)
    async with ChatClient(base_url, "evalkit-sim") as client:

        async def one(i: int):
            msgs = [{"role": "user", "content": f"What is {i} + {i % 7}? Reply with only the number."}]
            req = ChatRequest(
                msgs, max_tokens=_length(i, max_tokens, uniform), request_id=f"fid-{i}", extra_body={"ignore_eos": True}
            )
            async with sem:  # the slot wait happens before t_sent, so it is not part of either TTFT
                return await client.chat(req)

        await asyncio.gather(*[one(-1 - i) for i in range(concurrency)])  # warm-up: open every connection
        return list(await asyncio.gather(*[one(i) for i in range(n)]))


def main() -> None:
    """Run the benchmark and print its figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16, help="mean completion length (varied per request)")
    ap.add_argument("--uniform", action="store_true", help="every request exactly --max-tokens long")
    ap.add_argument(
        "--sim-flag",
        action="append",
        default=[],
        help="extra flag for evalkit sim, e.g. --sim-flag=--time-scale=2 (repeatable)",
    )
    args = ap.parse_args()
    flags = [
        "--max-batch",
        str(args.concurrency),
        "--decode-rate",
        "100",
        "--batch-decode-rate",
        "400",
        *[part for f in args.sim_flag for part in f.split("=", 1)],
    ]
    with start_sim(flags) as sim:
        with fast_loop():  # the loop evalkit's commands run on (uvloop where installed)
            recs = asyncio.run(_measure(sim.base_url, args.requests, args.concurrency, args.max_tokens, args.uniform))
        events = {e["request_id"]: e for e in sim.events()}
    gaps, up, down = [], [], []
    bad = 0
    for r in recs:
        ev = events.get(r.request_id)
        if r.status != "ok" or ev is None or ev["first_token"] is None or r.t_first_token is None:
            bad += 1
            continue
        gaps.append(r.ttft_s - (ev["first_token"] - ev["arrived"]))
        up.append(ev["arrived"] - r.t_sent)
        down.append(r.t_first_token - ev["first_token"])
    lengths = "exactly" if args.uniform else "about"
    print(
        f"timing fidelity: {args.requests} requests, concurrency {args.concurrency}, "
        f"{lengths} {args.max_tokens} tokens each, sim flags {' '.join(flags)}"
    )
    # Tails on a shared 2-core machine are mostly other processes' CPU: print the load next to the figures.
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(_row("evalkit TTFT - sim TTFT", gaps))
    print(_row("  sent -> sim arrived", up))
    print(_row("  sim first_token -> client chunk", down))
    print(f"failed or unmatched requests: {bad}")
    print(
        json.dumps(
            {
                "gap_p50_ms": round(percentile(gaps, 50) * 1000, 3),
                "gap_p99_ms": round(percentile(gaps, 99) * 1000, 3),
                "target_p99_ms": 5.0,
                "pass": percentile(gaps, 99) * 1000 < 5.0 and bad == 0,
            }
        )
    )


if __name__ == "__main__":
    main()
