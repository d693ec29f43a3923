"""`evalkit load --ray --client-hosts 2` against a one-process `evalkit load` of the same open-loop load, on one
machine: the TTFT error of each (|client TTFT - the sim's own TTFT|, matched by request id to `/sim/events`), its p99,
and the difference (issue #43: within 1 ms), with each host's clock offset, uncertainty and round trip.

The load keeps about `--streams` requests in flight: each answer is `--tokens` tokens at `--stream-rate` tok/s, so
the rate is streams x stream-rate / tokens requests a second. The sim serves every request at its own rate (a batch
as large as the streams, a batch decode rate that keeps each stream's pace). The Ray cluster is local: a head and
one more node (`ray.cluster_utils.Cluster`), one CPU each, as tests/test_load_ray.py starts it. The two runs
alternate `--repeat` times (one process first), each against a fresh sim.

With `--busy N`, N busy loops (`python -c 'while True: pass'`) run beside it the whole time, started before the
cluster and stopped after (issue #54: the hosts' actors ran at Ray's nice 15 and, with the cores busy, read their
answers seconds late). Each host's niceness, read inside its actor, is printed where the run records it.

    python benchmarks/bench_load_hosts.py [--streams 512] [--tokens 128] [--stream-rate 50] [--seconds 10]
                                          [--repeat 2] [--busy 0]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from evalkit.sim.launch import start_sim
from evalkit.stats import percentile


def _load(
    base_url: str, out: Path, name: str, rate: float, requests: int, warmup: int, tokens: int, *extra: str
) -> Path:
    cmd = [
        sys.executable, "-m", "evalkit", "load", "--base-url", base_url, "--out", str(out), "--name", name,
        "--no-metrics", "--token-scale", "1", "--rate", f"{rate:g}", "--requests", str(requests),
        "--warmup", str(warmup), "--prompt-tokens", "20", "--output-tokens", str(tokens), *extra,
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-3000:])
        raise SystemExit(f"evalkit load {name} exited {r.returncode}")
    return Path(r.stdout.strip().splitlines()[-1])


def _errors(run: Path, events: list[dict[str, Any]]) -> dict[str, Any]:
    truth = {e["request_id"]: e for e in events}
    lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
    measured = [x for x in lines if x["phase"] == "measured" and x.get("ttft_s") is not None]
    errs = []
    for x in measured:
        ev = truth.get(x["request_id"])
        if ev and ev.get("first_token") is not None:
            errs.append(abs(x["ttft_s"] - (ev["first_token"] - ev["arrived"])) * 1000)
    s = json.loads((run / "summary.json").read_text())
    figures = run / "client_hosts.jsonl"
    nice = {
        f["client_host"]: f.get("nice")
        for f in (json.loads(x) for x in (figures.read_text().splitlines() if figures.is_file() else []))
    }
    late = [x["send_lateness_s"] * 1000 for x in measured]
    return {
        "requests": len(measured),
        "matched": len(errs),
        "errors": s["errors"],
        "ttft_err_p50_ms": percentile(errs, 50),
        "ttft_err_p99_ms": percentile(errs, 99),
        "ttft_err_max_ms": max(errs) if errs else None,
        "lateness_p99_ms": percentile(late, 99),
        "error_budget_ms": None if s["client"]["error_budget_s"] is None else s["client"]["error_budget_s"] * 1000,
        "hosts": [
            {
                "requests": h["requests"],
                "nice": nice.get(h["client_host"]),
                "clock_offset_ms": [o * 1000 for o in h["clock_offset_s"]],
                "clock_uncertainty_ms": h["clock_uncertainty_s"] * 1000,
                "round_trip_ms": h["round_trip_s"] * 1000,
            }
            for h in s["client"].get("hosts", [])
        ],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=512)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--stream-rate", type=float, default=50.0)
    ap.add_argument("--seconds", type=float, default=10.0, help="measured seconds of sends per run")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--busy", type=int, default=0, help="busy loops beside the runs, the whole time")
    args = ap.parse_args()
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        return _bench(args)
    finally:
        for b in busy:
            b.kill()
            b.wait()


def _bench(args: argparse.Namespace) -> int:
    from ray.cluster_utils import Cluster

    rate = args.streams * args.stream_rate / args.tokens
    requests = int(rate * args.seconds)
    warmup = int(rate * args.tokens / args.stream_rate)  # one answer's length of sends: the streams filled first
    sim_flags = [
        "--max-batch", str(args.streams * 2), "--decode-rate", f"{args.stream_rate:g}",
        "--batch-decode-rate", f"{args.stream_rate * args.streams * 2:g}", "--prefill-rate", "1000000",
    ]  # fmt: skip
    print(
        f"load hosts: {args.streams} streams ({rate:g} req/s x {args.tokens} tokens at {args.stream_rate:g} tok/s), "
        f"{requests} measured + {warmup} warm-up requests a run; {os.cpu_count()} cores; {args.busy} busy loops; "
        f"coordinator nice {os.getpriority(os.PRIO_PROCESS, 0)}; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    small: dict[str, Any] = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024}
    cluster = Cluster(initialize_head=True, head_node_args={**small, "include_dashboard": False})
    cluster.add_node(**small)
    cluster.wait_for_nodes()
    rows = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeat):
                for label, extra in (("1 process", ()), ("2 hosts", ("--ray", cluster.address, "--client-hosts", "2"))):
                    sim = start_sim(sim_flags)
                    try:
                        run = _load(
                            sim.base_url, Path(tmp), f"r{i}-{len(extra)}", rate, requests, warmup, args.tokens, *extra
                        )
                        row = {"run": label, "repeat": i, **_errors(run, sim.events(wait_s=60))}
                    finally:
                        sim.stop()
                    row["load_avg_1m"] = os.getloadavg()[0]
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    finally:
        cluster.shutdown()
    head = "| run | repeat | requests | TTFT err p50 | TTFT err p99 | max | lateness p99 | error budget p99 | clock ±"
    print(head + " | RTT | nice | load 1m |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        unc = max((h["clock_uncertainty_ms"] for h in r["hosts"]), default=None)
        rtt = min((h["round_trip_ms"] for h in r["hosts"]), default=None)
        print(
            f"| {r['run']} | {r['repeat']} | {r['matched']} | {r['ttft_err_p50_ms']:.3f} ms | "
            f"{r['ttft_err_p99_ms']:.3f} ms | {r['ttft_err_max_ms']:.3f} ms | {r['lateness_p99_ms']:.2f} ms | "
            f"{r['error_budget_ms']:.3f} ms | "
            + ("-" if unc is None else f"{unc:.3f} ms")
            + " | "
            + ("-" if rtt is None else f"{rtt:.3f} ms")
            + f" | {' / '.join(str(h['nice']) for h in r['hosts']) or '-'} | {r['load_avg_1m']:.2f} |"
        )
    for i in range(args.repeat):
        one, two = (next(r for r in rows if r["repeat"] == i and r["run"] == k) for k in ("1 process", "2 hosts"))
        diff = two["ttft_err_p99_ms"] - one["ttft_err_p99_ms"]
        print(f"repeat {i}: TTFT error p99, 2 hosts minus 1 process: {diff:+.3f} ms (within 1 ms: {abs(diff) <= 1})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
