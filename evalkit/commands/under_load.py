"""`evalkit capability --under-load LOAD`: its flags, their checks, and its line on the terminal.

The two passes (idle, then under the background load) and their comparison are `evalkit.under_load`'s.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from evalkit.errors import UsageError
from evalkit.load.load_spec import LoadSpec, parse_load_spec
from evalkit.runs.schemas import Background, UnderLoadComparison


def add_under_load_arguments(g: argparse._ArgumentGroup) -> None:
    """`--under-load LOAD` and `--idle-run DIR`."""
    g.add_argument(
        "--under-load",
        metavar="LOAD",
        help="ask the questions at idle and again under a background load: 'concurrency=4', "
        "'rate=2,arrivals=poisson,prompt_tokens=512' or a TOML file of those keys (docs/datasets.md)",
    )
    g.add_argument(
        "--idle-run",
        type=Path,
        metavar="DIR",
        help="with --under-load: take the idle answers from this earlier capability run instead of an idle pass",
    )


def check_under_load(args: argparse.Namespace) -> LoadSpec | None:
    """The parsed load (None without --under-load); --idle-run must be a capability run holding graded.jsonl."""
    if args.under_load is None:
        if args.idle_run is not None:
            raise UsageError("--idle-run goes with --under-load")
        return None
    if args.idle_run is not None and not (args.idle_run / "graded.jsonl").is_file():
        raise UsageError(f"--idle-run {args.idle_run}: no graded.jsonl there (a capability run directory)")
    return parse_load_spec(args.under_load)


def describe(u: UnderLoadComparison) -> str:
    """One line for the terminal."""
    bg = u.background or Background()
    mif = bg.mean_in_flight
    share = u.changed_text_share
    verdict = "beyond noise, worse" if u.worse_beyond_noise else "within noise or better"
    source = u.load.source if u.load is not None else None
    return (
        f"under load ({source or '?'}): {u.loaded.correct:g}/{u.loaded.total} against "
        f"{u.idle.correct:g}/{u.idle.total} idle; {len(u.lost)} lost, {len(u.gained)} gained "
        f"({u.mcnemar['detail']}) {u.mcnemar['mark']} {verdict}; "
        f"{'-' if share is None else f'{share:.0%}'} of answers changed text; background "
        f"{bg.requests} requests, {'-' if mif is None else f'{mif:.2f}'} in flight on average"
    )
