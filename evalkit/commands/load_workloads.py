"""`evalkit load --trace FILE`, `--conversations USERS` and `--shared-prefix GROUPS`: the workloads shaped as users make
them (issue 31). Trace replay runs as one open-loop load point of the usual summary, with its own `trace` figures;
conversations and shared-prefix groups send chats of several messages and write `summary.json` with their own
`conversation` or `shared_prefix` figures beside the load summary's totals.
"""

from __future__ import annotations

import argparse
import gc
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
from evalkit.evidence.capture import evidence_summary
from evalkit.load import conversation, shared_prefix
from evalkit.load.cache_metrics import metrics_hit_rate
from evalkit.load.cache_reset import reset_prefix_cache
from evalkit.load.measure import LoadMeasurement, refuse_existing
from evalkit.load.runner import LoadRunner, PointRun
from evalkit.load.session_summary import SESSIONS, session_summary
from evalkit.load.slo import parse_target
from evalkit.load.summary import POINTS, build_summary
from evalkit.load.tokens import measure_token_scale
from evalkit.load.trace import MOONCAKE_BLOCK_TOKENS, TraceOptions, ideal_hit_tokens, parse_window, read_trace, select
from evalkit.load.trace import trace_plan as make_trace_plan
from evalkit.load.turns import TurnSender, hit_rate
from evalkit.load.workload import Lengths
from evalkit.runs.context import RunContext
from evalkit.runs.rundir import utc_now_iso
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


async def _token_scale(args: argparse.Namespace, ctx: Any) -> float:
    if args.token_scale is not None:
        ctx.rundir.update_manifest(token_scale=args.token_scale, tokenization={"method": "--token-scale"})
        return float(args.token_scale)
    scale, how = await measure_token_scale(ctx.client)
    ctx.rundir.update_manifest(token_scale=scale, tokenization=how)
    return scale


def _run_trace(args: argparse.Namespace, lines: Any, opts: TraceOptions) -> int:
    trace_opts = {
        "file": str(args.trace),
        "speedup": opts.speedup,
        "window_s": list(opts.window),
        "sample": opts.sample,
        "block_tokens": opts.block_tokens,
    }
    load_opts = {**_common(args), "slo": list(args.slo), "mode": "rate", "arrivals": "trace", "trace": trace_opts}
    manifest = {"seed": args.seed, "load": load_opts}

    async def run(ctx: RunContext) -> dict[str, Any]:
        scale = await _token_scale(args, ctx)
        plan = make_trace_plan(lines, opts, scale)  # every prompt built before the first send
        runner = LoadRunner(ctx.rundir, ctx.client, ctx.clock, args.timeout_s)
        point = PointRun(0, plan)
        t0 = utc_now_iso()
        # A full collection walking the thousands of prompts built in advance pauses the loop for milliseconds, and
        # sends are due every 5 ms at 200/s: they live until the end of the run, so they are kept out of its walks.
        gc.collect()
        gc.freeze()
        try:
            await runner.run_point(point)
        finally:
            gc.unfreeze()
            runner.close()
        await ctx.evidence.snapshot("trace")
        ctx.rundir.append(
            POINTS,
            {
                "point": 0,
                "mode": "rate",
                "load": plan.spec.load,
                "repeat": 0,
                "key": "trace",
                "started": t0,
                "finished": utc_now_iso(),
            },
        )
        await ctx.evidence.end()
        summary = {**build_summary(ctx.rundir.path), **evidence_summary(ctx.rundir.path)}
        hit, total = ideal_hit_tokens(select(lines, opts), opts.block_tokens)
        measured = point.measured()
        errors = [abs(x["send_lateness_s"]) for x in measured if x.get("send_lateness_s") is not None]
        summary["trace"] = {
            **trace_opts,
            "lines_in_file": len(lines),
            "requests_sent": len(measured),
            "mean_rate_rps": plan.spec.load,
            "ideal_hit_rate": hit / total if total else None,
            "send_error_s": {
                "max": max(errors) if errors else None,
                "within_5ms": sum(e <= 0.005 for e in errors) / len(errors) if errors else None,
            },
            "prefix_cache": hit_rate([x for x in measured if x.get("outcome") in ("correct", "wrong")]),
            "prefix_cache_metrics": metrics_hit_rate(ctx.rundir.path),
        }
        return summary

    measurement = LoadMeasurement(manifest, {"--seed": args.seed, **load_opts}, run, errors_fail=True)
    return run_measurement(
        target_from_args(args), run_options_from_args(args), measurement, lambda s: print(_trace_table(s), flush=True)
    )


def _run_sessions(args: argparse.Namespace) -> int:
    kind = "conversation" if args.conversations else "shared_prefix"
    opts: dict[str, Any] = {**_common(args), "mode": kind}
    opts["max_tokens"] = args.max_tokens
    if kind == "conversation":
        opts.update(users=args.conversations, turns=args.turns, think_s=args.think_s)
    else:
        opts.update(
            groups=args.shared_prefix,
            users_per_group=args.users_per_group,
            system_tokens=args.system_tokens,
            cache_runs=args.cache_runs,
            concurrency=args.concurrency or 1,
        )

    async def run(ctx: RunContext) -> dict[str, Any]:
        scale = await _token_scale(args, ctx)
        sender = TurnSender(ctx.rundir, ctx.client, args.timeout_s)
        prompt, output = (
            Lengths.parse(args.prompt_tokens, "--prompt-tokens"),
            Lengths.parse(args.output_tokens, "--output-tokens"),
        )
        try:
            if kind == "conversation":
                cspec = conversation.ConversationSpec(
                    args.conversations, args.turns, args.think_s, prompt, output, args.seed, scale, args.max_tokens
                )
                records = await conversation.run_conversations(cspec, sender, ctx.clock)
            else:
                runs = ("cold", "warm") if args.cache_runs == "both" else (args.cache_runs,)
                sspec = shared_prefix.SharedPrefixSpec(
                    args.shared_prefix,
                    args.users_per_group,
                    args.system_tokens,
                    prompt,
                    output,
                    runs,
                    args.concurrency or 1,
                    args.seed,
                    scale,
                    args.max_tokens,
                )
                key = ctx.profile.api_key
                records = await shared_prefix.run_shared_prefix(
                    sspec, sender, lambda: reset_prefix_cache(ctx.client.base_url, key)
                )
            await sender.flush()
        finally:
            sender.close()
        for rec in records:
            ctx.rundir.append(SESSIONS, rec)
        await ctx.evidence.snapshot(kind)
        await ctx.evidence.end()
        return {**session_summary(ctx.rundir.path), **evidence_summary(ctx.rundir.path)}

    measurement = LoadMeasurement(
        {"seed": args.seed, "load": opts}, {"--seed": args.seed, **opts}, run, errors_fail=True
    )
    return run_measurement(
        target_from_args(args), run_options_from_args(args), measurement, lambda s: print(_session_table(s), flush=True)
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
