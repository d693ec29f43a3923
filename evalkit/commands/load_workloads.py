"""`evalkit load --trace FILE`, `--conversations USERS` and `--shared-prefix GROUPS`: the workloads shaped as users make
them (issue 31). Trace replay runs as one open-loop load point of the usual summary, with its own `trace` figures;
conversations and shared-prefix groups send chats of several messages and write `summary.json` with their own
`conversation` or `shared_prefix` figures beside the load summary's totals.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import (
    MAX_TURNS,
    MAX_USERS,
    bounded_int,
    fraction,
    nonneg_float,
    positive_float,
    positive_int,
)
from evalkit.errors import UsageError
from evalkit.load.chat_workloads import ChatWorkload, chat_measurement
from evalkit.load.measure import refuse_existing
from evalkit.load.slo import parse_target
from evalkit.load.trace import MOONCAKE_BLOCK_TOKENS, TraceOptions, parse_window, read_trace
from evalkit.load.trace import trace_plan as make_trace_plan
from evalkit.load.trace_replay import TraceReplay, trace_measurement
from evalkit.runs.session import run_measurement


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The workload flags of `evalkit load`."""
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
    c = p.add_argument_group("conversations and shared-prefix groups")
    c.add_argument(
        "--conversations",
        type=bounded_int(1, MAX_USERS),
        metavar="USERS",
        help=f"USERS multi-turn chats at once (at most {MAX_USERS:,})",
    )
    c.add_argument(
        "--turns",
        type=bounded_int(1, MAX_TURNS),
        default=3,
        help=f"turns per conversation (default 3, at most {MAX_TURNS})",
    )
    c.add_argument("--think-s", type=nonneg_float, default=0.0, help="a user's pause between turns (default 0)")
    c.add_argument(
        "--max-tokens",
        type=positive_int,
        help="cap every answer of a conversation or shared-prefix run at N tokens (default: room for the count)",
    )
    c.add_argument(
        "--shared-prefix",
        type=bounded_int(1, MAX_USERS),
        metavar="GROUPS",
        help=f"GROUPS groups sharing a system prompt (at most {MAX_USERS:,})",
    )
    c.add_argument(
        "--users-per-group", type=bounded_int(1, MAX_USERS), default=4, help="users of each group (default 4)"
    )
    c.add_argument("--system-tokens", type=positive_int, default=512, help="each group's system prompt (default 512)")
    c.add_argument(
        "--cache-runs",
        choices=("cold", "warm", "both"),
        default="both",
        help="shared prefix: a cold run (cache emptied first where the server allows), a warm one, or both (default)",
    )


def wanted(args: argparse.Namespace) -> bool:
    """Whether the command line asks for one of these workloads."""
    return bool(args.trace or args.conversations or args.shared_prefix)


def run(args: argparse.Namespace) -> int:
    """Check the flags, then run the workload asked for."""
    chosen = [
        f
        for f, v in (
            ("--trace", args.trace),
            ("--conversations", args.conversations),
            ("--shared-prefix", args.shared_prefix),
        )
        if v
    ]
    if len(chosen) > 1:
        raise UsageError(f"give one of {', '.join(chosen)}")
    if args.search or args.rate is not None or (args.concurrency is not None and not args.shared_prefix):
        raise UsageError(f"{chosen[0]} sets its own load: drop --search, --rate and --concurrency")
    if args.slo and not args.trace:
        raise UsageError("--slo targets apply to --rate, --concurrency and --trace runs")
    refuse_existing(args.out, args.name, args.fresh)
    if args.trace:
        for target in args.slo:
            parse_target(target)  # a bad target is refused before any request
        lines = read_trace(args.trace)
        opts = TraceOptions(
            args.speedup,
            parse_window(args.trace_window) if args.trace_window else (0.0, None),
            args.trace_sample,
            args.trace_block_tokens,
            args.seed,
        )
        if args.dry_run:
            plan = make_trace_plan(lines, opts, args.token_scale or 1.0)
            rows = ["index  send_at_s  prompt_tokens  output_tokens  prompt_sha"]
            for i, off in enumerate(plan.offsets):
                r = plan.requests[i]
                rows.append(f"{i:5d}  {off:9.4f}  {r.prompt_tokens:13d}  {r.output_tokens:13d}  {r.digest()}")
            sys.stdout.write("\n".join(rows) + "\n")
            return 0
        return _run_trace(args, lines, opts)
    if args.dry_run:
        raise UsageError("--dry-run prints a --rate, --concurrency or --trace plan")
    return _run_sessions(args)


def _common(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "slo": [],
        "runs": 1,
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "prefix_tokens": 0,
        "timeout_s": args.timeout_s,
    }


def _run_trace(args: argparse.Namespace, lines: Any, opts: TraceOptions) -> int:
    figures = {
        "file": str(args.trace),
        "speedup": opts.speedup,
        "window_s": list(opts.window),
        "sample": opts.sample,
        "block_tokens": opts.block_tokens,
    }
    load_opts = {**_common(args), "slo": list(args.slo), "mode": "rate", "arrivals": "trace", "trace": figures}
    replay = TraceReplay(lines, opts, figures, token_scale=args.token_scale, timeout_s=args.timeout_s)
    return run_measurement(
        target_from_args(args),
        run_options_from_args(args),
        trace_measurement(replay, args.seed, load_opts),
        lambda s: print(_trace_table(s), flush=True),
    )


def _run_sessions(args: argparse.Namespace) -> int:
    kind = "conversation" if args.conversations else "shared_prefix"
    if kind == "conversation":
        shape: dict[str, Any] = {"users": args.conversations, "turns": args.turns, "think_s": args.think_s}
    else:
        shape = {
            "groups": args.shared_prefix,
            "users_per_group": args.users_per_group,
            "system_tokens": args.system_tokens,
            "cache_runs": args.cache_runs,
            "concurrency": args.concurrency or 1,
        }
    # The manifest's `load`: the common lengths, the workload's kind and cap, then its shape.
    opts: dict[str, Any] = {**_common(args), "mode": kind, "max_tokens": args.max_tokens, **shape}
    workload = ChatWorkload(
        kind=kind,
        seed=args.seed,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        max_tokens=args.max_tokens,
        token_scale=args.token_scale,
        timeout_s=args.timeout_s,
        **shape,
    )
    return run_measurement(
        target_from_args(args),
        run_options_from_args(args),
        chat_measurement(workload, opts),
        lambda s: print(_session_table(s), flush=True),
    )


def _pct(x: Any) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _ms(x: Any) -> str:
    return "-" if x is None else f"{x * 1000:.1f}"


def _trace_table(s: dict[str, Any]) -> str:
    t = s["trace"]
    m = s["points"][0]["metrics"] if s["points"] else {}
    return "\n".join(
        [
            f"trace {t['file']}: {t['requests_sent']} of {t['lines_in_file']} lines at {t['mean_rate_rps']:.3g}/s "
            f"(speedup {t['speedup']:g})",
            f"send error max {_ms(t['send_error_s']['max'])} ms, within 5 ms {_pct(t['send_error_s']['within_5ms'])}",
            f"ttft p50/p99 {_ms(m.get('ttft_s', {}).get('p50'))}/{_ms(m.get('ttft_s', {}).get('p99'))} ms, "
            f"errors {s['errors']}, wrong {s['wrong_answers']}",
            f"prefix cache hit rate {_pct(t['prefix_cache']['hit_rate'])} (server's cache_n; "
            f"an unbounded cache: {_pct(t['ideal_hit_rate'])})",
        ]
        + (
            [f"meets {', '.join(x['slo'] for x in s['slo'])}: {'yes' if s['points'][0]['meets_slo'] else 'no'}"]
            if s["slo"] and s["points"]
            else []
        )
    )


def _session_table(s: dict[str, Any]) -> str:
    rows = []
    if "conversation" in s:
        c = s["conversation"]
        rows.append(f"conversations: {c['users']} users x {c['turns']} turns, think {c['think_s']:g} s")
        for t in c["per_turn"]:
            rows.append(
                f"turn {t['turn']}: {t['requests']} requests, ttft p50 {_ms(t['ttft_s']['p50'])} ms, "
                f"e2e p50 {_ms(t['e2e_s']['p50'])} ms, prefix cache {_pct(t['prefix_cache']['hit_rate'])}"
            )
        rows.append(
            f"session duration p50 {_ms(c['sessions']['duration_s']['p50'])} ms; "
            f"completed {c['sessions']['completed']} of {c['users']}"
        )
    else:
        sp = s["shared_prefix"]
        rows.append(
            f"shared prefix: {sp['groups']} groups x {sp['users_per_group']} users, "
            f"{sp['system_tokens']}-token system prompts"
        )
        for r in sp["runs"]:
            reset = r["reset"]
            how = "" if reset is None else f" (reset: {reset['method'] if reset['reset'] else 'not possible'}"
            if r.get("cold_verified") is not None:
                how += f"; cold by the server's figures: {'yes' if r['cold_verified'] else 'NO'}"
            how += ")" if reset is not None else ""
            rows.append(
                f"{r['run']}{how}: {r['requests']} requests, ttft p50 {_ms(r['ttft_s']['p50'])} ms, "
                f"prefix cache {_pct(r['prefix_cache']['hit_rate'])}"
            )
    m = s.get("conversation", s.get("shared_prefix", {})).get("prefix_cache_metrics")
    if m:
        rows.append(f"prefix cache over the run by the server's metrics: {_pct(m['hit_rate'])}")
    rows.append(f"errors {s['errors']}, wrong {s['wrong_answers']}")
    return "\n".join(rows)
