"""`evalkit report`: markdown before/after tables (and PNG plots beside them) from run directories."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from evalkit.config.argtypes import nonneg_float, positive_int
from evalkit.errors import UsageError
from evalkit.redact import scrub
from evalkit.report.build import build_context
from evalkit.report.noise import DEFAULT_NOISE_FLOOR
from evalkit.report.render import render
from evalkit.report.runs import grouped_runs
from evalkit.runs.bisect_log import read_log
from evalkit.runs.summaries import load_runs, run_problems, run_warnings
from evalkit.runs.sweepdir import is_sweep_dir


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of `evalkit report`."""
    p.add_argument(
        "runs",
        nargs="*",
        type=Path,
        metavar="RUN_DIR",
        help="run directories, the first is the baseline; or one sweep directory (one column per point)",
    )
    p.add_argument(
        "--labels",
        help="comma-separated column labels, one per run (default: runs grouped by the build identity in their "
        "manifests: build label, else server version, model and --build-info; the grouping is printed)",
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        default=Path("report.md"),
        help="markdown file (default report.md); plots are written beside it",
    )
    p.add_argument("--template", type=Path, help="your own Jinja template (may import the packaged tables.md.j2)")
    p.add_argument(
        "--bisect-log",
        type=Path,
        action="append",
        default=[],
        help="JSONL log written by `evalkit bench --bisect-log`; rendered as the commit table",
    )
    p.add_argument("--cycle", type=positive_int, help="stress cycle to draw as a timeline (default: the first)")
    p.add_argument(
        "--changed-only",
        type=Path,
        metavar="FILE.jsonl",
        help="also write the capability questions that changed against the first run, one JSON line each",
    )
    p.add_argument(
        "--no-html", dest="html", action="store_false", help="write report.md only, no report.html beside it"
    )
    p.add_argument(
        "--noise-floor",
        type=nonneg_float,
        default=DEFAULT_NOISE_FLOOR,
        help=f"smallest relative rate change ever called beyond noise (default {DEFAULT_NOISE_FLOOR})",
    )


def run(args: argparse.Namespace) -> int:
    """Run `evalkit report`."""
    if not args.runs and not args.bisect_log:
        raise UsageError("give at least one run directory or --bisect-log")
    if any(is_sweep_dir(r) for r in args.runs):
        if len(args.runs) > 1 or args.labels or args.bisect_log or args.changed_only:
            raise UsageError(
                "a sweep directory is reported alone (its points are the columns): "
                "no other runs, --labels, --bisect-log or --changed-only"
            )
        return _sweep_report(args)
    labels = [s.strip() for s in args.labels.split(",")] if args.labels else None
    loaded = load_runs(args.runs)
    for problem in (p for r in loaded for p in run_problems(r) + run_warnings(r)):
        sys.stderr.write(f"warning: {problem}\n")
    runs, how = grouped_runs(loaded, labels)
    entries = [e for log in args.bisect_log for e in read_log(log)]
    out = args.output
    out.parent.mkdir(parents=True, exist_ok=True)
    context = build_context(runs, entries, out, args.noise_floor, args.cycle)
    # Run files are scrubbed as written; a run written before that, or by hand, is scrubbed here (the default key
    # variable's value, as evalkit.cli resolved it for this run, and any credential-looking value).
    resolved = getattr(args, "resolved_profile", None)
    key = resolved.api_key if resolved is not None else os.environ.get("OPENAI_API_KEY")
    out.write_text(scrub(render(context, args.template), (key,)), encoding="utf-8")
    for line in how if len(runs) > 1 else []:  # how the runs were grouped into builds, when --labels did not say
        sys.stderr.write(f"{line}\n")
    if args.html:
        from evalkit.report.html import plotly_missing, write_html

        missing = plotly_missing()
        if missing:
            sys.stderr.write(f"{missing}\n")
        else:
            page = write_html(context, runs, out.with_suffix(".html"), args.cycle, lambda t: scrub(t, (key,)))
            sys.stderr.write(f"wrote {page}\n")
    if args.changed_only is not None:
        from evalkit.report.capability import write_changed_lines

        n = write_changed_lines(runs, args.changed_only)
        sys.stderr.write(f"wrote {args.changed_only} ({n} changed question(s))\n")
    for p in context["plots"]:
        sys.stderr.write(f"wrote {out.with_name(p['file'])}\n")
    print(out, flush=True)
    return 0


def _sweep_report(args: argparse.Namespace) -> int:
    """`evalkit report SWEEP_DIR`: one column per point, marks against the sweep's baseline point."""
    from evalkit.report.sweep import write_sweep_report

    out = args.output
    out.parent.mkdir(parents=True, exist_ok=True)
    key = os.environ.get("OPENAI_API_KEY")
    report = write_sweep_report(args.runs[0], out, args.noise_floor, args.template, args.cycle)
    out.write_text(scrub(report.text, (key,)), encoding="utf-8")
    if args.html:
        from evalkit.report.html import plotly_missing, write_html

        missing = plotly_missing()
        if missing:
            sys.stderr.write(f"{missing}\n")
        else:
            page = write_html(
                report.context, report.runs, out.with_suffix(".html"), args.cycle, lambda t: scrub(t, (key,))
            )
            sys.stderr.write(f"wrote {page}\n")
    for f in report.files:
        sys.stderr.write(f"wrote {out.with_name(f)}\n")
    print(out, flush=True)
    return 0
