"""Client fidelity under load: evalkit's TTFT vs the sim's own clock at 1-512 streams, and the client's CPU per chunk.

Each of N streams sends requests back to back (128 tokens at 50 tok/s a stream by default), the streams' starts
spread over one request's length so arrivals do not come in one burst. Requests are matched by `X-Request-Id` to the
sim's `/sim/events`. Per request: |client TTFT - true TTFT|, split into the way up (`arrived - t_sent`, which must
never be negative) and the way down (client chunk - sim `first_token`). CPU per chunk is the client processes'
`getrusage` user + system time over the run divided by the text chunks they received; read lag is how long after
the kernel received a response's bytes the client read them (`read_lag_s`, the worst per request: a busy client
reads late,
while its stamps, the kernel's, stay true). The sim is pinned to core 0 and the client to the other cores
(`os.sched_setaffinity`); the machine is a shared VM, so each row prints the load average and the share of the
client cores' time the host took away (steal, from /proc/stat). `--client-procs K` spreads the streams over K
processes, each with its own loop, all stamping on one clock, each pinned to a core of its own where there are enough;
`--sims S` serves them from S sims on S cores of their own (a sim is one process: past ~512 streams of 50 tok/s one
sim core is the limit, not the client), client process k talking to sim k mod S. `--repeat R` runs each row R
times. `--floor-sim` also runs bench_read_floor.py --sim after each row: the same reader fed by a sim with this
row's load (one client process's share of the streams), the like-for-like floor (same sockets, bytes and arrival
pattern); its figures are in the row's JSON line (`sim_floor_us_per_read`, `x_sim_floor`). `--floor` also runs
benchmarks/bench_read_floor.py at the same stream count right after each row (the sim's
first core sends, the first client core reads) and prints the client's CPU a chunk over that floor. Each row also
counts the first tokens whose read held later bytes too (their stamp may be a later token's: "shared") and the
error budget, p99 of `first_token_stamp_bound_s` (evalkit.client.lag).

    python benchmarks/bench_client_load.py [--streams 1,64,256,512] [--tokens 128] [--rate 50] [--per-stream 2]
                                           [--client-procs 1] [--sims 1] [--floor] [--loop uvloop|asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import resource
import sys
from dataclasses import dataclass
from pathlib import Path

from evalkit.client import http_stream
from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.clock import Clock
from evalkit.eventloop import fast_loop, loop_name
from evalkit.sim.launch import start_sim
from evalkit.stats import percentile


@dataclass(frozen=True)
class Share:
    """One client process's part of a row: which streams it drives, and when stream 0 starts on the shared clock."""

    base_url: str
    streams: int
    mine: tuple[int, ...]
    per_stream: int
    tokens: int
    rate: float
    anchor: tuple[float, float]
    start_at: float
    loop: str
    cpus: tuple[int, ...]


async def _drive(share: Share) -> dict:
    """This process's records (as small dicts) and its CPU seconds (user, system)."""
    clock = Clock.from_anchor(share.anchor)
    period = share.tokens / share.rate

    async with ChatClient(share.base_url, "evalkit-sim", clock=clock) as client:

        async def stream(i: int) -> list:
            await asyncio.sleep(max(0.0, share.start_at + period * i / share.streams - clock.now()))
            out = []
            for k in range(share.per_stream):
                msgs = [{"role": "user", "content": f"Tell me a story about {i}-{k}."}]
                rec = await client.chat(
                    ChatRequest(
                        msgs,
                        max_tokens=share.tokens,
                        extra_body={"ignore_eos": True},
                        request_id=f"load-{share.streams}-{i}-{k}",
                    )
                )
                out.append(
                    {
                        "request_id": rec.request_id,
                        "status": rec.status,
                        "t_sent": rec.t_sent,
                        "t_first_token": rec.t_first_token,
                        "ttft_s": rec.ttft_s,
                        "chunks": len(rec.chunk_times),
                        "read_lag_s": rec.read_lag_s,
                        "first_token_stamp_bound_s": getattr(rec, "first_token_stamp_bound_s", None),  # not on main
                    }
                )
            return out

        t0 = resource.getrusage(resource.RUSAGE_SELF)  # µs resolution (os.times counts 10 ms ticks)
        per = await asyncio.gather(*[stream(i) for i in share.mine])
        t1 = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "records": [r for rs in per for r in rs],
        "cpu_user_s": t1.ru_utime - t0.ru_utime,
        "cpu_sys_s": t1.ru_stime - t0.ru_stime,
        "loop": loop_name(),
    }


def _run_share(share: Share) -> dict:
    """A client process's entry point: pin, pick the loop, drive its streams."""
    if share.cpus:
        os.sched_setaffinity(0, set(share.cpus))
    with fast_loop(enabled=share.loop != "asyncio"):
        return asyncio.run(_drive(share))


def _ms(values: list[float], q: float) -> str:
    v = percentile(values, q)
    return "-" if v is None else f"{v * 1000:8.2f}"


def _cpu_ticks(cpus: tuple[int, ...]) -> tuple[int, int]:
    """(all ticks, steal ticks) of these cores so far, from /proc/stat ((0, 0) where it cannot be read)."""
    total = steal = 0
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and (not cpus or int(name[3:]) in cpus):
                    values = [int(v) for v in fields[:8]]
                    total += sum(values)
                    steal += values[7] if len(values) > 7 else 0
    except OSError:
        pass
    return total, steal


def measure(
    streams: int,
    per_stream: int,
    tokens: int,
    rate: float,
    procs: int,
    loop: str,
    sim_cpus: set[int] | None,
    client_cpus: tuple[int, ...],
    sims: int = 1,
) -> dict:
    """One row: start `sims` sims sized for `streams`, drive them from `procs` processes, match records to the sims'
    events."""
    procs = max(1, min(procs, streams))
    sims = max(1, min(sims, procs))
    each = -(-max(streams, 1) // sims)
    flags = ["--max-batch", str(each), "--decode-rate", str(rate), "--batch-decode-rate", str(rate * each)]
    flags += ["--seed", "1"]
    clock = Clock()
    sim_cores = sorted(sim_cpus) if sim_cpus else []
    with contextlib.ExitStack() as stack:
        # the sims stamp on this clock: arrived - t_sent is exact
        servers = [stack.enter_context(start_sim(flags, clock=clock)) for _ in range(sims)]
        for i, sim in enumerate(servers):
            if sim_cores:
                os.sched_setaffinity(sim.proc.pid, {sim_cores[i % len(sim_cores)]} if sims > 1 else set(sim_cores))
        # a core of its own for each client process where there are enough, else all of them shared
        own = len(client_cpus) >= procs
        shares = [
            Share(
                servers[k % sims].base_url,
                streams,
                tuple(range(k, streams, procs)),
                per_stream,
                tokens,
                rate,
                clock.anchor,
                clock.now() + 0.5 + 0.2 * procs,
                loop,
                (client_cpus[k],) if own and procs > 1 else client_cpus,
            )
            for k in range(procs)
        ]
        ticks0 = _cpu_ticks(client_cpus)
        if procs == 1:
            parts = [_run_share(shares[0])]
        else:
            with multiprocessing.get_context("fork").Pool(procs) as pool:
                parts = pool.map(_run_share, shares)
        ticks1 = _cpu_ticks(client_cpus)
        events = {e["request_id"]: e for sim in servers for e in sim.events()}
    err, up, down, lags, bad, chunks, bounds = [], [], [], [], 0, 0, []
    for r in (r for part in parts for r in part["records"]):
        ev = events.get(r["request_id"])
        chunks += r["chunks"]
        if r["read_lag_s"] is not None:
            lags.append(r["read_lag_s"])
        if r["first_token_stamp_bound_s"] is not None:
            bounds.append(r["first_token_stamp_bound_s"])
        if r["status"] != "ok" or ev is None or ev.get("first_token") is None or r["t_first_token"] is None:
            bad += 1
            continue
        up.append(ev["arrived"] - r["t_sent"])
        down.append(r["t_first_token"] - ev["first_token"])
        err.append(abs(r["ttft_s"] - (ev["first_token"] - ev["arrived"])))
    user = sum(part["cpu_user_s"] for part in parts)
    system = sum(part["cpu_sys_s"] for part in parts)
    cpu = user + system
    spent = ticks1[0] - ticks0[0]
    return {
        "streams": streams,
        "client_procs": procs,
        "loop": parts[0]["loop"],
        "requests": len(err) + bad,
        "failed": bad,
        "ttft_err_p99_ms": _num(err, 99),
        "up_p50_ms": _num(up, 50),
        "up_p99_ms": _num(up, 99),
        "up_min_ms": min(up) * 1000 if up else None,
        "down_p50_ms": _num(down, 50),
        "down_p99_ms": _num(down, 99),
        "read_lag_p99_ms": _num(lags, 99),
        "read_lag_max_ms": max(lags) * 1000 if lags else None,
        "first_tokens_shared": sum(1 for b in bounds if b > 0),
        "error_budget_p99_ms": _num(bounds, 99),
        "negative_up": sum(1 for u in up if u < 0),
        "sims": sims,
        "cpu_us_per_chunk": cpu / chunks * 1e6 if chunks else None,
        "cpu_user_us_per_chunk": user / chunks * 1e6 if chunks else None,
        "cpu_sys_us_per_chunk": system / chunks * 1e6 if chunks else None,
        "chunks": chunks,
        "steal_pct": 100.0 * (ticks1[1] - ticks0[1]) / spent if spent > 0 else None,
        "load_avg_1m": os.getloadavg()[0],
        "_err": err,
        "_up": up,
        "_down": down,
        "_lags": lags,
        "_bounds": bounds,
    }


def _floor(streams: int, send_cpu: int, recv_cpu: int, seconds: float) -> dict:
    """benchmarks/bench_read_floor.py at this stream count: its CPU a read (user + system, µs)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_read_floor

    row = bench_read_floor.floor_row(streams, max(3.0, seconds), send_cpu, recv_cpu)
    return {
        "floor_us_per_read": row["user_us"] + row["sys_us"],
        "floor_reads_per_batch": row["reads"] / max(1, row["batches"]),
    }


def _sim_floor(streams: int, sim_cpus: set[int] | None, recv_cpu: int, tokens: int, rate: float, per: int) -> dict:
    """bench_read_floor.py --sim at this stream count: the reader fed by a sim with this row's load."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_read_floor

    row = bench_read_floor.sim_floor_row(streams, recv_cpu, sim_cpus, tokens, rate, per)
    return {
        "sim_floor_us_per_read": row["user_us"] + row["sys_us"],
        "sim_floor_us_per_event": row["cpu_us_per_event"],
        "sim_floor_reads_per_batch": row["reads"] / max(1, row["batches"]),
    }


def _num(values: list[float], q: float) -> float | None:
    v = percentile(values, q)
    return None if v is None else v * 1000


def main() -> None:
    """Run each stream count and print the table (and one JSON line per row)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", default="1,64,256,512")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--rate", type=float, default=50.0, help="tokens per second a stream")
    ap.add_argument("--per-stream", type=int, default=2, help="requests each stream sends, back to back")
    ap.add_argument("--client-procs", type=int, default=1, help="client processes, each with its own event loop")
    ap.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="uvloop",
        help="the client's event loop (uvloop where installed, as evalkit's commands use)",
    )
    ap.add_argument(
        "--sims", type=int, default=1, help="sims, each on a core of its own (client process k -> sim k mod S)"
    )
    ap.add_argument("--floor", action="store_true", help="run bench_read_floor at each row's stream count after it")
    ap.add_argument(
        "--floor-sim",
        action="store_true",
        help="run bench_read_floor --sim (the reader alone, fed by a sim with this row's load) after each row",
    )
    ap.add_argument("--hold-ms", type=float, help="the batch reader's hold between polls (A/B; default its own)")
    ap.add_argument("--no-pin", action="store_true", help="leave the sim and the client unpinned")
    ap.add_argument("--repeat", type=int, default=1, help="rows per stream count (a shared machine's noise)")
    args = ap.parse_args()
    if args.hold_ms is not None:
        http_stream.BATCH_HOLD_S = args.hold_ms / 1000
    cores = sorted(os.sched_getaffinity(0))
    pin = not args.no_pin and len(cores) >= 2
    sims = max(1, args.sims)
    sim_cpus = set(cores[:sims]) if pin else None
    client_cpus = tuple(cores[sims:]) if pin else ()
    print(
        f"client load: {args.tokens} tokens at {args.rate:g} tok/s a stream, {args.per_stream} requests a stream, "
        f"{args.client_procs} client process(es), {args.loop} loop, hold {http_stream.BATCH_HOLD_S * 1000:g} ms, "
        f"{f'{sims} sim(s) on cores {sorted(sim_cpus or ())}, client on {list(client_cpus)}' if pin else 'unpinned'}; "
        f"{os.cpu_count()} cores, shared machine (load average printed per row)"
    )
    print(
        "| streams | TTFT err p99 | up p50 | up p99 | up worst (min) | down p50 | down p99 | read lag p99 | "
        "CPU/chunk (user+sys) | failed | shared first tokens | error budget p99 | load avg | steal | floor | x floor | "
        "sim floor | x sim floor |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in [int(x) for x in args.streams.split(",") for _ in range(max(1, args.repeat))]:
        row = measure(
            n, args.per_stream, args.tokens, args.rate, args.client_procs, args.loop, sim_cpus, client_cpus, sims
        )
        if args.floor:
            row.update(_floor(n, min(sim_cpus or {0}), client_cpus[0] if client_cpus else 0, args.tokens / args.rate))
        if args.floor_sim:
            first_sim = {min(sim_cpus)} if sim_cpus else None
            recv = client_cpus[0] if client_cpus else 0
            # one client process's share: with --client-procs K each process reads n / K streams from a sim of its own
            share = max(1, n // max(1, min(args.client_procs, n)))
            row.update(_sim_floor(share, first_sim, recv, args.tokens, args.rate, args.per_stream))
            row["x_sim_floor"] = row["cpu_us_per_chunk"] / row["sim_floor_us_per_read"]
        steal = "-" if row["steal_pct"] is None else f"{row['steal_pct']:.1f}%"
        floor = row.get("floor_us_per_read")
        ratio = f"{row['cpu_us_per_chunk'] / floor:.2f}" if floor else "-"
        print(
            f"| {n} | {_ms(row['_err'], 99)} ms | {_ms(row['_up'], 50)} ms | {_ms(row['_up'], 99)} ms | "
            f"{row['up_min_ms']:+8.2f} ms | {_ms(row['_down'], 50)} ms | {_ms(row['_down'], 99)} ms | "
            f"{_ms(row['_lags'], 99)} ms | {row['cpu_us_per_chunk']:6.1f} µs ({row['cpu_user_us_per_chunk']:.1f}"
            f"+{row['cpu_sys_us_per_chunk']:.1f}) | {row['failed']}/{row['requests']} | {row['first_tokens_shared']} | "
            f"{_ms(row['_bounds'], 99)} ms | {row['load_avg_1m']:.2f} | {steal} | "
            f"{f'{floor:.1f} µs' if floor else '-'} | {ratio} | "
            + (f"{row['sim_floor_us_per_read']:.1f} µs | {row['x_sim_floor']:.2f} |" if args.floor_sim else "- | - |"),
            flush=True,
        )
        print(
            json.dumps(
                {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items() if not k.startswith("_")}
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
