"""`evalkit load --trace FILE`: a Mooncake trace replayed open loop as one load point of the usual summary, with its
own `trace` figures (evalkit.load.trace_replay sends it). A workload of evalkit/commands/load_workloads.py."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import cast

from evalkit.commands.load_workload_parts import LoadWorkload, ms, pct
from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import fraction, positive_float, positive_int
from evalkit.load.measure import LoadMeasurement, LoadPlan
from evalkit.load.slo import parse_target
from evalkit.load.summary_records import LoadSummaryJson
from evalkit.load.trace import MOONCAKE_BLOCK_TOKENS, parse_window, read_trace
from evalkit.load.trace import trace_plan as make_trace_plan
from evalkit.load.trace_replay import TraceReplay
from evalkit.session.measurement import run_measurement


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of trace replay."""
    t = p.add_argument_group("trace replay (Mooncake JSONL: timestamp ms, input_length, output_length, hash_ids)")
    t.add_argument(
        "--trace", type=Path, metavar="FILE", help="replay this trace open loop instead of --rate/--concurrency"
    )
    t.add_argument("--speedup", type=positive_float, default=1.0, help="divide the trace's gaps by F (default 1)")
    t.add_argument("--trace-window", metavar="A:B", help="only the lines from A to B s of trace time")
    t.add_argument("--trace-sample", type=fraction, default=1.0, metavar="P", help="keep each line with probability P")
    t.add_argument(
        "--trace-block-tokens",
        type=positive_int,
        default=MOONCAKE_BLOCK_TOKENS,
        help=f"prompt tokens per hash id (default {MOONCAKE_BLOCK_TOKENS}, Mooncake's)",
    )


def run(args: argparse.Namespace) -> int:
    """Replay the trace (or print its plan with `--dry-run`)."""
    for target in args.slo:
        parse_target(target)  # a bad target is refused before any request
    lines = read_trace(args.trace)
    replay = TraceReplay(
        lines,
        str(args.trace),
        args.speedup,
        parse_window(args.trace_window) if args.trace_window else (0.0, None),
        args.trace_sample,
        args.trace_block_tokens,
        tuple(args.slo),
        args.prompt_tokens,
        args.output_tokens,
        args.token_scale,
        args.timeout_s,
    )
    if args.dry_run:
        plan = make_trace_plan(lines, replay.options(args.seed), args.token_scale or 1.0)
        rows = ["index  send_at_s  prompt_tokens  output_tokens  prompt_sha"]
        for i, off in enumerate(plan.offsets):
            r = plan.requests[i]
            rows.append(f"{i:5d}  {off:9.4f}  {r.prompt_tokens:13d}  {r.output_tokens:13d}  {r.digest()}")
        sys.stdout.write("\n".join(rows) + "\n")
        return 0
    return run_measurement(
        target_from_args(args),
        run_options_from_args(args),
        LoadMeasurement(LoadPlan(replay, seed=args.seed)),
        lambda s: print(trace_table(cast(LoadSummaryJson, s.to_json())), flush=True),
    )


def trace_table(s: LoadSummaryJson) -> str:
    """The table of a trace replay, from its summary."""
    t = s["trace"]
    ttft = s["points"][0]["metrics"]["ttft_s"] if s["points"] else None
    return "\n".join(
        [
            f"trace {t['file']}: {t['requests_sent']} of {t['lines_in_file']} lines at {t['mean_rate_rps']:.3g}/s "
            f"(speedup {t['speedup']:g})",
            f"send error max {ms(t['send_error_s']['max'])} ms, within 5 ms {pct(t['send_error_s']['within_5ms'])}",
            f"ttft p50/p99 {ms(None if ttft is None else ttft['p50'])}/{ms(None if ttft is None else ttft['p99'])} ms, "
            f"errors {s['errors']}, wrong {s['wrong_answers']}",
            f"prefix cache hit rate {pct(t['prefix_cache']['hit_rate'])} (server's cache_n; "
            f"an unbounded cache: {pct(t['ideal_hit_rate'])})",
        ]
        + (
            [f"meets {', '.join(x['slo'] for x in s['slo'])}: {'yes' if s['points'][0]['meets_slo'] else 'no'}"]
            if s["slo"] and s["points"]
            else []
        )
    )


WORKLOADS: tuple[LoadWorkload, ...] = (LoadWorkload("--trace", "trace", run, takes_slo=True, takes_dry_run=True),)
