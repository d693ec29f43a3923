"""`evalkit gate`: check run summaries against TOML rules; exit 0 all hold, 1 one fails, 2 bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.gate import check, format_table, load_rules
from evalkit.gate.junit import write_junit
from evalkit.runs.summaries import FinishedRun, load_runs, run_problems, run_warnings, runs_by_kind

EPILOG = """exit codes:
  0  every rule holds
  1  a rule fails (the table says which)
  2  bad usage or input: a missing or malformed rules file, a run directory that is not a finished run (or whose
     files disagree), a metric missing from the runs or the baseline

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
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories, one per kind")
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
    given = load_runs(args.runs)
    base_given = load_runs(args.baseline) if args.baseline else []
    _refuse_mismatched(given + base_given)
    runs = runs_by_kind(given, "runs")
    baseline = runs_by_kind(base_given, "baseline runs") if args.baseline else None
    results = check(rules, runs, baseline)
    print(format_table(results))
    if args.junit:
        write_junit(results, args.junit)
    return 0 if all(r.passed for r in results) else 1
