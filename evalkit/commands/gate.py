"""`evalkit gate`: check run summaries against TOML rules; exit 0 all hold, 1 one fails, 2 bad input, 3 a rule not
decided (its shortfall within noise, or the measuring machine changed)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.gate import Rule, check, exit_code, format_table, load_rules
from evalkit.gate.junit import write_junit
from evalkit.runs.summaries import FinishedRun, load_runs, run_problems, run_warnings, runs_by_kind
from evalkit.runs.sweepdir import is_sweep_dir

EPILOG = """exit codes:
  0  every rule holds
  1  a rule fails (the table says which)
  2  bad usage or input: a missing or malformed rules file, a run directory that is not a finished run (or whose
     files disagree), a metric missing from the runs or the baseline
  3  no rule fails, but one is not decided: a relative or offset rule missed its limit by a shortfall the runs'
     raw samples cannot tell from noise (evalkit's one comparison rule, the sampled rules one Holm family at 5%),
     or the measuring machine changed between the run and the baseline (a distorted client, calibration probes
     apart); measure again, with more runs or cycles, on a quiet machine

rules file (TOML), one [[rule]] table per check; metric is <kind>.<path in that kind's summary.json>, op one of
< <= > >= == !=, and exactly one of value (an absolute limit), relative (limit = relative x the baseline's value,
needs --baseline) or offset (limit = the baseline's value + offset):

  [[rule]]
  metric = "stress.metrics.short_insert_ttft_s.p95"
  op = "<="
  value = 2.0

  [[rule]]
  metric = "bench.prompts.code.tok_s"
  op = ">="
  relative = 0.97

  [[rule]]
  metric = "capability.total.correct"
  op = ">="
  offset = -2
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit gate`."""
    p.epilog = EPILOG
    p.add_argument(
        "runs",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="run directories, one per kind; or one sweep directory (each point against its baseline point)",
    )
    p.add_argument("--rules", type=Path, required=True, help="TOML file of [[rule]] tables")
    p.add_argument(
        "--baseline",
        type=Path,
        nargs="+",
        default=[],
        metavar="RUN_DIR",
        help="baseline run directories for relative and offset rules, one per kind",
    )
    p.add_argument("--junit", type=Path, help="also write the results as JUnit XML, one test case per rule")


def _refuse_mismatched(runs: list[FinishedRun]) -> None:
    # A gate must never pass on a run that is not what it claims: every problem is named, then exit 2.
    for warning in (w for r in runs for w in run_warnings(r)):
        sys.stderr.write(f"warning: {warning}\n")
    problems = [p for r in runs for p in run_problems(r)]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UsageError(problems[0] + more)


def run(args: argparse.Namespace) -> int:
    """Run `evalkit gate`."""
    rules = load_rules(args.rules)
    if len(args.runs) == 1 and is_sweep_dir(args.runs[0]):
        return _sweep_gate(args, rules)
    given = load_runs(args.runs)
    base_given = load_runs(args.baseline) if args.baseline else []
    _refuse_mismatched(given + base_given)
    runs = runs_by_kind(given, "runs")
    baseline = runs_by_kind(base_given, "baseline runs") if args.baseline else None
    results = check(rules, runs, baseline)
    print(format_table(results))
    if args.junit:
        write_junit(results, args.junit)
    return exit_code(results)


def _sweep_gate(args: argparse.Namespace, rules: list[Rule]) -> int:
    """`evalkit gate SWEEP_DIR`: each point against the sweep's baseline point; exit 1 when any point fails, 3 when
    none fails and a rule of one is not decided."""
    from evalkit.gate.junit import write_junit_suites
    from evalkit.gate.sweep import exit_code, format_gates, gate_sweep, sweep_runs

    if args.baseline:
        raise UsageError("--baseline does not go with a sweep directory: its baseline point is the baseline")
    baseline, runs = sweep_runs(args.runs[0])
    _refuse_mismatched([r for rs in runs.values() for r in rs])
    gates = gate_sweep(args.runs[0], rules)
    print(format_gates(gates, baseline))
    if args.junit:
        write_junit_suites({f"evalkit.gate.{g.point}": g.results for g in gates}, args.junit)
    return exit_code(gates)
