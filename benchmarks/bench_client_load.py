"""Client fidelity under load: evalkit's TTFT vs the sim's own clock at 1-512 streams, and the client's CPU per chunk.

Each of N streams sends requests back to back (128 tokens at 50 tok/s a stream by default), the streams' starts
spread over one request's length so arrivals do not come in one burst. Requests are matched by `X-Request-Id` to the
sim's `/sim/events`. Per request: |client TTFT - true TTFT|, split into the way up (`arrived - t_sent`, which must
never be negative) and the way down (client chunk - sim `first_token`). CPU per chunk is the client process's
`time.process_time` over the measured phase divided by the text chunks it received. The sim is pinned to core 0 and
the client to core 1 (`os.sched_setaffinity`); the machine is shared, so the load average is printed with each row.

    python benchmarks/bench_client_load.py [--streams 1,64,256,512] [--tokens 128] [--rate 50] [--per-stream 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

from evalkit.client import ChatClient, ChatRequest
from evalkit.eventloop import fast_loop
from evalkit.sim.launch import start_sim
from evalkit.stats import percentile


async def _run_streams(base_url: str, streams: int, per_stream: int, tokens: int, rate: float) -> tuple[list, float]:
    """Every stream's records, and the client's CPU seconds over the run."""
    period = tokens / rate
    async with ChatClient(base_url, "evalkit-sim") as client:
        async def stream(i: int) -> list:
            await asyncio.sleep(period * i / streams)
            out = []
            for k in range(per_stream):
                msgs = [{"role": "user", "content": f"Tell me a story about {i}-{k}."}]
                out.append(await client.chat(ChatRequest(msgs, max_tokens=tokens, request_id=f"load-{streams}-{i}-{k}",
                                                         extra_body={"ignore_eos": True})))
            return out

        cpu0 = time.process_time()
        per = await asyncio.gather(*[stream(i) for i in range(streams)])
        cpu = time.process_time() - cpu0
    return [r for rs in per for r in rs], cpu


def _ms(values: list[float], q: float) -> str:
    v = percentile(values, q)
    return "-" if v is None else f"{v * 1000:8.2f}"


def measure(streams: int, per_stream: int, tokens: int, rate: float, pin: bool, loop: str = "asyncio") -> dict:
    """One row: start a sim sized for `streams`, drive it, match records to the sim's events."""
    flags = ["--max-batch", str(max(streams, 1)), "--decode-rate", str(rate),
             "--batch-decode-rate", str(rate * max(streams, 1)), "--seed", "1"]
    with start_sim(flags) as sim:
        if pin:
            os.sched_setaffinity(sim.proc.pid, {0})
        with fast_loop(enabled=loop != "asyncio"):
            recs, cpu = asyncio.run(_run_streams(sim.base_url, streams, per_stream, tokens, rate))
        events = {e["request_id"]: e for e in sim.events()}
    err, up, down, bad, chunks = [], [], [], 0, 0
    for r in recs:
        ev = events.get(r.request_id)
        chunks += len(r.chunk_times)
        if r.status != "ok" or ev is None or ev.get("first_token") is None or r.t_first_token is None:
            bad += 1
            continue
        up.append(ev["arrived"] - r.t_sent)
        down.append(r.t_first_token - ev["first_token"])
        err.append(abs(r.ttft_s - (ev["first_token"] - ev["arrived"])))
    return {"streams": streams, "requests": len(recs), "failed": bad,
            "ttft_err_p99_ms": percentile(err, 99) * 1000 if err else None,
            "up_p50_ms": percentile(up, 50) * 1000 if up else None,
            "up_p99_ms": percentile(up, 99) * 1000 if up else None,
            "up_min_ms": min(up) * 1000 if up else None,
            "down_p50_ms": percentile(down, 50) * 1000 if down else None,
            "down_p99_ms": percentile(down, 99) * 1000 if down else None,
            "cpu_us_per_chunk": cpu / chunks * 1e6 if chunks else None,
            "chunks": chunks, "load_avg_1m": os.getloadavg()[0],
            "_err": err, "_up": up, "_down": down}


def main() -> None:
    """Run each stream count and print the table (and one JSON line per row)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="1,64,256,512")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rate", type=float, default=50.0, help="tokens per second a stream")
    ap.add_argument("--per-stream", type=int, default=2, help="requests each stream sends, back to back")
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="uvloop",
                    help="the client's event loop (uvloop where installed, as evalkit's commands use)")
    ap.add_argument("--no-pin", action="store_true", help="leave the sim and the client unpinned")
    args = ap.parse_args()
    pin = not args.no_pin and len(os.sched_getaffinity(0)) >= 2
    if pin:
        os.sched_setaffinity(0, {1})
    print(f"client load: {args.tokens} tokens at {args.rate:g} tok/s a stream, {args.per_stream} requests a stream, "
          f"{'sim on core 0, client on core 1' if pin else 'unpinned'}, {args.loop} loop; {os.cpu_count()} cores, "
          "shared machine")
    print("| streams | TTFT err p99 | up p50 | up p99 | up worst (min) | down p50 | down p99 | CPU/chunk | "
          "failed | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in args.streams.split(",")]:
        row = measure(n, args.per_stream, args.tokens, args.rate, pin, args.loop)
        print(f"| {n} | {_ms(row['_err'], 99)} ms | {_ms(row['_up'], 50)} ms | {_ms(row['_up'], 99)} ms | "
              f"{row['up_min_ms']:+8.2f} ms | {_ms(row['_down'], 50)} ms | {_ms(row['_down'], 99)} ms | "
              f"{row['cpu_us_per_chunk']:6.1f} µs | {row['failed']}/{row['requests']} | {row['load_avg_1m']:.2f} |",
              flush=True)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()
                          if not k.startswith("_")}), flush=True)


if __name__ == "__main__":
    main()
