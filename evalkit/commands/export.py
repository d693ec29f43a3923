"""`evalkit export`: one run's requests and grades as one CSV or Parquet table, for notebooks."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.report.export import FORMATS, write_table


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit export`."""
    p.add_argument("run", type=Path, metavar="RUN_DIR", help="a finished run directory")
    p.add_argument("--format", choices=FORMATS, default="csv", help="table format (default csv; parquet needs pyarrow)")
    p.add_argument("-o", "--output", type=Path, help="file to write (default <run name>.<format> here)")


def run(args: argparse.Namespace) -> int:
    """Run `evalkit export`."""
    out = args.output or Path(f"{args.run.resolve().name}.{args.format}")
    out.parent.mkdir(parents=True, exist_ok=True)
    n = write_table(args.run, args.format, out)
    sys.stderr.write(f"wrote {n} row(s)\n")
    print(out, flush=True)
    return 0
