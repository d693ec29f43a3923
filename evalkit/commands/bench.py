"""`evalkit bench`: code / math / prose decode throughput, single and concurrent; bisect mode for `git bisect run`."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from evalkit.bench.length_note import length_note
from evalkit.bench.measure import BenchMeasurement
from evalkit.bench.throughput import BenchPlan, load_prompts, packaged_prompts
from evalkit.bench.until_sure import DEFAULT_MARGIN, DEFAULT_MAX_RUNS
from evalkit.cli import add_output_options, add_server_options
from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import MAX_RUNS, bounded_int, finite_float, nonneg_int, positive_int, timeout_s
from evalkit.errors import UsageError
from evalkit.evidence.gpu_telemetry import telemetry_line
from evalkit.gate import bisect
from evalkit.runs.bisect_log import append_step
from evalkit.runs.evidence_parts import SpecDecode
from evalkit.runs.schemas import BenchSummary, KindSummary, as_kind
from evalkit.session.connect import discover_model
from evalkit.session.measurement import measure_run, run_measurement


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit bench`."""
    add_server_options(p)
    add_output_options(p)
    p.add_argument(
        "--runs",
        type=bounded_int(1, MAX_RUNS),
        default=3,
        help=f"runs per prompt; the median is reported (default 3; at most {MAX_RUNS:,})",
    )
    p.add_argument(
        "--until-sure",
        action="store_true",
        help="measure each prompt again until the 95%% interval of its median is within --margin of it: at least "
        "--runs, at most --max-runs times (docs/until-sure.md)",
    )
    p.add_argument(
        "--max-runs",
        type=bounded_int(1, MAX_RUNS),
        help=f"with --until-sure: the most runs (default {DEFAULT_MAX_RUNS}; at most {MAX_RUNS:,})",
    )
    p.add_argument(
        "--margin",
        type=finite_float,
        help=f"with --until-sure: the interval's half-width as a share of the median (default {DEFAULT_MARGIN})",
    )
    p.add_argument("--max-tokens", type=positive_int, default=512, help="completion tokens per request (default 512)")
    p.add_argument(
        "--concurrency",
        type=positive_int,
        default=2,
        help="also run this many streams at once and report combined and per-stream rates "
        "(default 2: `concurrent` in summary.json; 1 measures single streams only)",
    )
    p.add_argument("--prompts", type=Path, help="your own prompts: TOML [[prompt]] name/text, or JSONL name/prompt")
    p.add_argument("--warmup", type=nonneg_int, default=1, help="short requests sent first and not counted (default 1)")
    p.add_argument(
        "--timeout-s",
        type=timeout_s,
        default=300.0,
        help="per-request timeout in seconds; a request past it is recorded `timeout` (default 300)",
    )
    p.add_argument(
        "--no-ignore-eos",
        dest="ignore_eos",
        action="store_false",
        help="force no output length: send neither ignore_eos nor min_tokens (a server that refuses "
        "them is found by the preflight anyway)",
    )
    g = p.add_argument_group("bisect mode (exit 0 good, 1 bad, 125 skip, for `git bisect run`)")
    g.add_argument("--bisect-good-at-least", type=finite_float, metavar="X", help="good when the metric is >= X tok/s")
    g.add_argument("--bisect-bad-at-most", type=finite_float, metavar="Y", help="bad when the metric is <= Y tok/s")
    g.add_argument(
        "--metric",
        default="code",
        help="prompt name whose decode tok/s is judged, or 'concurrent' for the combined rate",
    )
    g.add_argument(
        "--bisect-log",
        type=Path,
        help="JSONL log to append each step to (default $EVALKIT_BISECT_LOG, else OUT/bisect-log.jsonl)",
    )
    g.add_argument("--bisect-commit", help="commit to log (default: git HEAD of the working directory)")
    g.add_argument("--bisect-note", help="note to log (default: the commit's subject)")


def _plan(args: argparse.Namespace, bisecting: bool) -> BenchPlan:
    if args.runs < 1 or args.max_tokens < 2 or args.concurrency < 1:
        raise UsageError("--runs and --concurrency must be >= 1 and --max-tokens >= 2")
    margin, max_runs = _until_sure(args)
    prompts = load_prompts(args.prompts) if args.prompts else packaged_prompts()
    concurrency = args.concurrency
    if bisecting:
        # A bisect step measures only what it judges: the write-up ran the code prompt 3 times per commit.
        if args.metric == "concurrent":
            concurrency = max(2, concurrency)
            prompts = prompts[:1]
        else:
            chosen = [p for p in prompts if p.name == args.metric]
            if not chosen:
                raise UsageError(f"--metric {args.metric!r} names no prompt ({', '.join(p.name for p in prompts)})")
            prompts, concurrency = chosen, 1
    return BenchPlan(
        prompts=tuple(prompts),
        runs=args.runs,
        max_tokens=args.max_tokens,
        concurrency=concurrency,
        ignore_eos=args.ignore_eos,
        warmup=max(0, args.warmup),
        timeout_s=args.timeout_s,
        until_sure_margin=margin,
        max_runs=max_runs,
    )


def _until_sure(args: argparse.Namespace) -> tuple[float | None, int | None]:
    """--until-sure's margin and most runs; its companions without it, or a margin outside (0, 1), one line."""
    if not args.until_sure:
        for flag, v in (("--max-runs", args.max_runs), ("--margin", args.margin)):
            if v is not None:
                raise UsageError(f"{flag} needs --until-sure")
        return None, None
    margin = DEFAULT_MARGIN if args.margin is None else args.margin
    if not 0 < margin < 1:
        raise UsageError(f"--margin {margin} is a share of the median: give one between 0 and 1 (0.01 is ±1%)")
    max_runs = args.max_runs or max(DEFAULT_MAX_RUNS, args.runs)
    if max_runs < args.runs:
        raise UsageError(f"--max-runs {max_runs} is below --runs {args.runs} (the fewest runs)")
    return margin, max_runs


def _rate(v: float | None, failed: int) -> str:
    # Never a figure made of nothing: a rate no request measured is "–", with the failures that left it empty.
    text = f"{v:.1f}" if v is not None else "–"
    return text + (f" ({failed} failed)" if failed else "")


def _print_table(record: KindSummary) -> None:
    summary = as_kind(record, BenchSummary)
    raw = summary.to_json()
    lines = ["prompt      decode tok/s   request tok/s   runs"]
    for name, p in summary.prompts.items():
        runs = ", ".join(f"{r:.1f}" for r in p.runs)
        dec = _rate(p.tok_s, p.failed or 0)
        req = _rate(p.request_tok_s, 0)
        lines.append(f"{name:<11} {dec:>12} {req:>15}   [{runs}]")
    c = summary.concurrent
    if c:
        per = " / ".join(f"{x:.1f}" for x in c.per_stream_tok_s if x is not None)
        comb = _rate(c.combined_tok_s, c.failed or 0)
        lines.append(f"{c.streams} streams: {comb} tok/s combined ({per or '–'} per stream)")
    u = summary.until_sure
    if u:
        spans = []
        sures = [(name, p.until_sure) for name, p in summary.prompts.items()]
        for name, s in [*sures, *([("concurrent", c.until_sure)] if c else [])]:
            if s is not None and s.interval:
                lo, hi = s.interval
                spans.append(f"{name} [{lo:.1f}, {hi:.1f}] n={s.n}")
        state = "decided" if u.decided else f"still undecided after {u.max_runs} runs: {', '.join(u.undecided)}"
        lines.append(f"until sure (±{u.margin:.0%} of the median, 95% interval): {state}; " + "; ".join(spans))
    note = length_note(raw)
    if note:
        lines.append(f"note: {note}")
    if summary.stopped_early:
        lines.append(
            f"warning: {len(summary.stopped_early)} request(s) stopped before --max-tokens "
            "(the server may ignore ignore_eos)"
        )
    if summary.errors:
        lines.append(f"warning: {summary.errors} request(s) failed, e.g. {summary.error_samples[0]['error']}")
    client = summary.client_timing()
    if client is not None and client.note:
        lines.append(f"warning: {client.note}")
    spec = summary.spec_decode_part() or SpecDecode()
    for name, e in spec.per_label.items():
        if e.per_position:
            pos = " / ".join(f"{x:.1%}" for x in e.per_position)
            lines.append(
                f"{name}: draft acceptance per position {pos}, mean length {e.mean_acceptance_length:.2f} ({e.source})"
            )
    for name, e in spec.timings_per_label.items():
        if e.acceptance_rate is not None:
            lines.append(
                f"{name}: {e.accepted_tokens:,} of {e.draft_tokens:,} drafted tokens accepted "
                f"({e.acceptance_rate:.1%}; {e.source})"
            )
    gpu = summary.gpu_telemetry_part()
    if gpu is not None:
        lines.append(telemetry_line(raw["gpu_telemetry"]) or "")
        for name, w in gpu.per_label.items():
            lines.append(f"  {name:<11} {w.j_per_output_token:.3g} J/output token, {w.power_w_mean or 0:.0f} W")
    # The table on standard output, as every command's; warnings on standard error.
    warned = [ln for ln in lines if ln.startswith("warning:")]
    table = [ln for ln in lines if not ln.startswith("warning:")]
    if table:
        print("\n".join(table), flush=True)
    if warned:
        print("\n".join(warned), file=sys.stderr)


def _metric_value(record: KindSummary, metric: str) -> float | None:
    summary = as_kind(record, BenchSummary)
    if metric == "concurrent":
        return summary.concurrent.combined_tok_s if summary.concurrent is not None else None
    p = summary.prompts.get(metric)
    return p.tok_s if p is not None else None


def _bisect(args: argparse.Namespace, plan: BenchPlan) -> int:
    good, bad = args.bisect_good_at_least, args.bisect_bad_at_most
    bisect.check_thresholds(good, bad)
    log = args.bisect_log or Path(os.environ.get("EVALKIT_BISECT_LOG") or Path(args.out) / "bisect-log.jsonl")

    def record(value: float | None, code: int, run_dir: Path | None, reason: str | None) -> int:
        append_step(
            log,
            bisect.make_step(
                args.bisect_commit, args.bisect_note, args.metric, value, code, good, bad, run_dir, reason
            ),
        )
        shown = f"{value:.1f} tok/s" if value is not None else "nothing measured"
        print(
            f"bisect: {args.metric} {shown} -> {bisect.VERDICTS[code]} (exit {code})"
            + (f": {reason}" if reason else ""),
            file=sys.stderr,
        )
        return code

    try:
        target = target_from_args(args)
        asyncio.run(discover_model(target.profile))
    except UsageError as e:  # unreachable server: git bisect must skip this commit, not call it bad
        return record(None, bisect.SKIP, None, str(e))
    result = measure_run(target, run_options_from_args(args), BenchMeasurement(plan))
    summary, path = result.summary, result.path
    _print_table(summary)
    value = _metric_value(summary, args.metric)
    code = bisect.exit_code(value, good, bad)
    reason = "no successful request" if value is None else None
    record(value, code, path, reason)
    print(path, flush=True)
    return code


def run(args: argparse.Namespace) -> int:
    """Run `evalkit bench`."""
    bisecting = args.bisect_good_at_least is not None or args.bisect_bad_at_most is not None
    if bisecting and (args.bisect_good_at_least is None or args.bisect_bad_at_most is None):
        raise UsageError("bisect mode needs both --bisect-good-at-least and --bisect-bad-at-most")
    plan = _plan(args, bisecting)
    if bisecting:
        return _bisect(args, plan)
    return run_measurement(target_from_args(args), run_options_from_args(args), BenchMeasurement(plan), _print_table)
