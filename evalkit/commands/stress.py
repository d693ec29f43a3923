"""`evalkit stress`: the seeded long-prefill / short-insert / cancel / concurrent scheduler.

Resuming: started again with an existing `--name`, stress continues that run cycle by cycle. The schedule options
(`--seed`, `--cycles`, `--long-tokens`, `--shuffle`, `--reuse-long-prompt`, `--gen-tokens`, `--time-scale`,
`--short-max-tokens`, `--long-max-tokens`) must equal the ones the run was started with, else exit 2 with a
one-line reason naming the differing option, and the run directory is left untouched; so must the server (URL,
identity, model: `evalkit.runs.run_identity`). `--max-minutes`, `--timeout-s` and `--gpu-interval` may differ.
A completed run started again says it is finished and exits with its own code; `--fresh` starts over.

- A cycle counts as done only when `cycles.jsonl` has its line (`cycle`, `attempt`, `requests`, `t_start`,
  `t_end`), written after the cycle's last request line. Done cycles are skipped; the first cycle without such a
  line is run again from its start, whether it was cut by SIGKILL, Ctrl-C, `--max-minutes` or a crash.
- Every line of `requests.jsonl`, `long_prompts.jsonl`, `loop_lag.jsonl`, `gpu_memory.jsonl` and `cycles.jsonl`
  carries `attempt`: 0 for the first start, then the number of resumes in `manifest.json["resumes"]`. The files
  stay append-only, so a cut cycle's lines remain; the summary counts, for each completed cycle, only the lines
  of the attempt that completed it (`cycle_attempts` in summary.json), and says how many other lines it ignored
  (`ignored_lines.abandoned_attempts`). `requests`, `errors`, `wrong_answers` and every metric therefore cover
  completed cycles only, and a resumed run reports the same counts as an uninterrupted one.
- A partial run (Ctrl-C, `--max-minutes`) reports its cut cycle apart, as `unfinished_cycle` (cycle, attempt,
  requests, errors, wrong answers); those lines are superseded when a resume re-runs the cycle.
- Token counting and long prompts are reloaded, not redone: the counter from `manifest.json["tokenization"]`
  (same method, template overhead or calibration line; pointed at the current `--base-url`) and every prompt
  already fitted from `long_prompts.jsonl`, so a re-run cycle sends exactly the text it sent before. Only the
  token-count calibration requests of the attempt whose counter is used are counted.
"""

from __future__ import annotations

import argparse
import hashlib
import secrets
import sys
from pathlib import Path

from evalkit.cli import add_output_options, add_server_options
from evalkit.commands.baseline_run import baseline_run_dir
from evalkit.commands.target_flags import run_options_from_args, target_from_args
from evalkit.config.argtypes import any_int, positive_float, positive_int, timeout_s
from evalkit.errors import UsageError
from evalkit.evidence.gpu_memory import peaks_line
from evalkit.evidence.gpu_telemetry import telemetry_line
from evalkit.runs.rundir import read_json_object
from evalkit.runs.schemas import KindSummary, StressSummary, as_kind
from evalkit.runs.summary_parts import Number
from evalkit.session.measurement import run_measurement
from evalkit_stress import metric_registry
from evalkit_stress.diagnose import diagnosis_lines
from evalkit_stress.measure import StressMeasurement
from evalkit_stress.plan import StressPlan
from evalkit_stress.resume import (
    check_resume,
)
from evalkit_stress.scenario_file import (
    MAX_CYCLES,
    MAX_TOKENS_PER_REQUEST,
    ScenarioFile,
    builtin_scenarios,
    load_scenarios,
)
from evalkit_stress.scenario_results import check_same_scenarios, summary_lines
from evalkit_stress.schedule import render_schedule
from evalkit_stress.until_sure import DEFAULT_MARGIN, SureRule, until_sure_line

EPILOG = """how long it takes: the default cycle sends 14 requests, four of them 54K-token prompts (one
cancelled part-way), so a cycle lasts about five long prefills of your server. Measured on the simulated dual
RTX 2080 Ti of the write-up ('before' build, 1,350 prefill tok/s): about 200 s a cycle, so the default 18
cycles take about an hour. A server prefilling ~10,000 tok/s (an 8B model on an H200) needs roughly 30 s a
cycle, about 10 minutes for 18 (an estimate from the prefill rate). --cycles 2 gives a first look; --dry-run
prints the schedule without a server.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit stress`."""
    p.epilog = EPILOG
    add_server_options(p)
    add_output_options(p)
    g = p.add_argument_group("schedule")
    g.add_argument(
        "--scenario",
        metavar="FILE",
        help="a TOML scenario file (docs/stress-scenarios.md); default: the write-up's cycle",
    )
    g.add_argument("--cycles", type=positive_int, help="cycles to run (default: the scenario file's `cycles`, else 18)")
    g.add_argument("--seed", type=any_int, default=42, help="fixes every prompt, delay and choice (default 42)")
    g.add_argument(
        "--long-tokens", type=positive_int, default=54000, help="long prompt length in server tokens (default 54000)"
    )
    g.add_argument("--shuffle", action="store_true", help="shuffle the scenario order in each cycle (from the seed)")
    g.add_argument(
        "--reuse-long-prompt",
        action="store_true",
        help="send the same long prompt every time (tests the prefix cache instead of defeating it)",
    )
    g.add_argument(
        "--reuse-prompts",
        action="store_true",
        help="send the long prompts earlier runs of this seed sent (default: each run salts them, so a warm "
        "server's prefix cache does not serve them)",
    )
    g.add_argument(
        "--time-scale",
        type=positive_float,
        default=1.0,
        help="divide every planned delay by F (for a server run with `evalkit sim --time-scale F`)",
    )
    g.add_argument("--dry-run", action="store_true", help="print the schedule and exit; needs no server")
    u = p.add_argument_group("until sure (docs/until-sure.md)")
    u.add_argument(
        "--until-sure",
        action="store_true",
        help="stop after the cycle that decides every verdict and key figure (at least 3 cycles, at most "
        "--max-cycles); the run is a prefix of the --max-cycles one",
    )
    u.add_argument("--max-cycles", type=positive_int, help="with --until-sure: the most cycles (default 18)")
    u.add_argument(
        "--margin",
        type=positive_float,
        help="with --until-sure: a figure is sure when its 95%% interval is within this share of it, and a "
        "comparison equivalent within it (default 0.10)",
    )
    u.add_argument(
        "--baseline",
        metavar="RUN_DIR",
        help="with --until-sure: decide each key figure's comparison against this finished stress run",
    )
    r = p.add_argument_group("requests")
    r.add_argument(
        "--no-ignore-eos",
        dest="ignore_eos",
        action="store_false",
        help="force no generation length: send neither ignore_eos nor min_tokens (a server that "
        "refuses them is found by the preflight anyway)",
    )
    r.add_argument(
        "--short-max-tokens", type=positive_int, default=64, help="max_tokens of short requests (default 64)"
    )
    r.add_argument("--long-max-tokens", type=positive_int, default=64, help="max_tokens of long requests (default 64)")
    r.add_argument(
        "--gen-tokens", type=positive_int, default=512, help="tokens per concurrent generation (default 512)"
    )
    r.add_argument("--timeout-s", type=timeout_s, default=900.0, help="per-request timeout in seconds (default 900)")
    r.add_argument("--max-minutes", type=positive_float, help="end the run cleanly after this many minutes")
    r.add_argument(
        "--gpu-interval", type=positive_float, default=1.0, help="seconds between nvidia-smi samples (default 1)"
    )
    r.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress on standard error (a bar on a terminal; in a log a line at least every 25 s, one a cycle)",
    )


MAX_RUN_REQUESTS = 1_000_000


def _check(args: argparse.Namespace, source: ScenarioFile) -> None:
    if args.cycles < 1:
        raise UsageError("--cycles must be at least 1")
    if args.cycles > MAX_CYCLES:
        raise UsageError(f"--cycles {args.cycles} is above the limit of {MAX_CYCLES}")
    total = args.cycles * source.requests_per_cycle
    if total > MAX_RUN_REQUESTS:
        raise UsageError(
            f"--cycles {args.cycles} x {source.requests_per_cycle} requests a cycle is "
            f"{total} requests, above the limit of {MAX_RUN_REQUESTS}"
        )
    if args.long_tokens > MAX_TOKENS_PER_REQUEST:
        raise UsageError(f"--long-tokens {args.long_tokens} is above the limit of {MAX_TOKENS_PER_REQUEST}")
    if args.gen_tokens < 16:
        raise UsageError("--gen-tokens must be at least 16")
    if args.long_tokens < 100:
        raise UsageError("--long-tokens must be at least 100")
    if args.time_scale <= 0:
        raise UsageError("--time-scale must be positive")
    if args.max_minutes is not None and args.max_minutes <= 0:
        raise UsageError("--max-minutes must be positive")


def run(args: argparse.Namespace) -> int:
    """Run `evalkit stress` (or print its schedule with `--dry-run`)."""
    # The file is read and validated before anything else, so a bad one costs no server time.
    source = load_scenarios(args.scenario) if args.scenario else builtin_scenarios()
    rule = _until_sure(args)
    if rule is not None:
        args.cycles = rule.max_cycles
    if args.cycles is None:
        args.cycles = source.cycles or 18
    _check(args, source)
    baseline = baseline_run_dir(args.baseline, "stress", "requests.jsonl").resolve() if args.baseline else None
    plan = StressPlan(
        seed=args.seed,
        cycles=args.cycles,
        source=source,
        long_tokens=args.long_tokens,
        time_scale=args.time_scale,
        shuffle=args.shuffle,
        reuse_long_prompt=args.reuse_long_prompt,
        short_max_tokens=args.short_max_tokens,
        long_max_tokens=args.long_max_tokens,
        gen_tokens=args.gen_tokens,
        timeout_s=args.timeout_s,
        max_minutes=args.max_minutes,
        prompt_salt=_salt(args),
        ignore_eos=args.ignore_eos,
        gpu_interval_s=args.gpu_interval,
        progress=not args.no_progress,  # tqdm's bar on a terminal, timed lines in a log
        log_steps=not args.no_progress and not sys.stderr.isatty(),
        until_sure=rule,
        baseline=baseline,
    )
    if args.dry_run:
        sys.stdout.write(render_schedule(plan.schedule(), args.time_scale))
        return 0
    if args.name and not args.fresh:
        # Before opening the run: a refused resume must not stamp a resume into the manifest.
        check_resume(Path(args.out) / args.name, {"seed": plan.seed, "cycles": plan.cycles, **plan.settings()})
        check_same_scenarios(Path(args.out) / args.name, source)
    measurement = StressMeasurement(plan)

    def show(summary: KindSummary) -> None:
        _print_summary(summary)
        if not source.builtin:
            print("\n".join(summary_lines(summary.to_json())), flush=True)

    return run_measurement(target_from_args(args), run_options_from_args(args), measurement, show)


def _until_sure(args: argparse.Namespace) -> SureRule | None:
    """The stopping rule `--until-sure` asks for; its companions without it are a usage error."""
    if not args.until_sure:
        for flag, v in (("--max-cycles", args.max_cycles), ("--margin", args.margin), ("--baseline", args.baseline)):
            if v is not None:
                raise UsageError(f"{flag} needs --until-sure")
        return None
    if args.cycles is not None:
        raise UsageError("--until-sure runs up to --max-cycles cycles: give --max-cycles, not --cycles")
    rule = SureRule(max_cycles=args.max_cycles or 18, margin=args.margin if args.margin is not None else DEFAULT_MARGIN)
    if rule.margin >= 1:
        raise UsageError(f"--margin {rule.margin} is a share of the figure: give one below 1 (0.10 is ±10%)")
    if rule.max_cycles < rule.min_cycles:
        raise UsageError(
            f"--max-cycles {rule.max_cycles}: --until-sure decides nothing before {rule.min_cycles} cycles"
        )
    return rule


def _salt(args: argparse.Namespace) -> str:
    """The run's prompt salt: none with --reuse-prompts (or --dry-run); a resumed run's own; else one from the run
    directory's path (a new --name or --out, new prompts), random for a run without --name."""
    if args.reuse_prompts or args.dry_run:
        return ""
    if not args.name:
        return secrets.token_hex(4)
    path = (Path(args.out) / args.name).resolve()
    if (path / "manifest.json").exists():
        return str((read_json_object(path / "manifest.json").get("stress") or {}).get("prompt_salt") or "")
    return hashlib.sha256(str(path).encode()).hexdigest()[:8]


def _fmt(d: dict[str, Number | None] | None, digits: int = 3) -> str:
    if not d or d["p50"] is None:
        return "-"
    return f"p50 {d['p50']:.{digits}g}  p95 {d['p95']:.{digits}g}  max {d['max']:.{digits}g}  (n={d['n']})"


def _print_summary(record: KindSummary) -> None:
    s = as_kind(record, StressSummary)
    raw = s.to_json()
    out = [
        f"stress seed {s.seed}: {s.cycles}/{s.cycles_planned} cycles, {s.requests} requests, "
        f"{s.errors} errors, {s.wrong_answers} wrong answers, {s.divergent} divergent"
        + (f"  [{s.stopped}: partial]" if s.partial else "")
    ]
    if s.attempts is not None and s.attempts > 1:
        ignored = s.ignored_lines or {}
        out.append(
            f"  resumed: {s.attempts} attempts, {ignored['abandoned_attempts']} request lines "
            "of cut-off attempts ignored"
        )
    u = s.unfinished_cycle
    if u:
        out.append(
            f"  cycle {u['cycle']} cut off after {u['requests']} requests ({u['errors']} errors, "
            f"{u['wrong_answers']} wrong answers): not counted; run again with the same --name to resume"
        )
    not_exercised = s.not_exercised or {}
    failed_by_metric = s.failed_by_metric or {}
    for name, d in s.metrics.items():
        text = _fmt(d)
        ne = not_exercised.get(metric_registry.same_requests(name))
        failed = failed_by_metric.get(name)
        if text == "-" and (ne or failed):
            # Never a figure made of nothing: say what left it empty.
            parts = ([f"not exercised: {', '.join(ne['reasons'])} ({ne['count']})"] if ne else []) + (
                [f"{failed} failed"] if failed else []
            )
            text = "– (" + "; ".join(parts) + ")"
        out.append(f"  {name:<28} {text}")
    out.extend("  " + line for line in diagnosis_lines(raw["diagnoses"], raw["metrics"]))
    if s.until_sure:
        out.append("  " + until_sure_line(raw["until_sure"]))
    for e in (s.error_requests or [])[:10]:
        out.append(f"  error {e['kind']}: {e['request_id']} ({e['scenario']}) {e.get('error') or ''}"[:160])
    for w in (s.wrong_answer_requests or [])[:10]:
        out.append(f"  wrong: {w['request_id']} ({w['scenario']}) expected {w['expected'][:20]} got {w['extracted']}")
    client = s.client_timing()
    if client is not None and client.distorted:
        out.extend("  client distorted the run: " + r for r in client.distortion_reasons)
    if client is not None and client.note:
        out.append(f"  warning: {client.note}")
    if s.gpu_telemetry_part() is not None:
        out.append(f"  {telemetry_line(raw['gpu_telemetry'])}")
    verdict = s.gpu_verdict()
    if verdict is not None:
        out.append(f"  {peaks_line(raw['gpu_memory'])}")
        out.append(f"  GPU memory: {verdict.verdict}")
    print("\n".join(out), flush=True)
