"""`evalkit gate`: check run summaries against TOML rules; exit 0 all hold, 1 one fails, 2 bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.gate import check, format_table, load_rules
from evalkit.junit import write_junit
from evalkit.summaries import load_runs, runs_by_kind


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit gate`."""
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories, one per kind")
    p.add_argument("--rules", type=Path, required=True, help="TOML file of [[rule]] tables")
    p.add_argument("--baseline", type=Path, nargs="+", default=[], metavar="RUN_DIR",
                   help="baseline run directories for relative and offset rules, one per kind")
    p.add_argument("--junit", type=Path, help="also write the results as JUnit XML, one test case per rule")


def run(args: argparse.Namespace) -> int:
    """Run `evalkit gate`."""
    rules = load_rules(args.rules)
    runs = runs_by_kind(load_runs(args.runs), "runs")
    baseline = runs_by_kind(load_runs(args.baseline), "baseline runs") if args.baseline else None
    results = check(rules, runs, baseline)
    print(format_table(results))
    if args.junit:
        write_junit(results, args.junit)
    return 0 if all(r.passed for r in results) else 1
