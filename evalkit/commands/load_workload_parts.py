"""What the workloads of `evalkit load` (evalkit/commands/load_workloads.py) share: the entry each module lists,
the manifest's common lengths and the figures of their tables."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LoadWorkload:
    """One workload: the flag that asks for it (its value in `dest`), the run it starts, and which of the load
    command's own flags it takes."""

    flag: str
    dest: str
    run: Callable[[argparse.Namespace], int]
    takes_slo: bool = False  # --slo targets judged on its requests
    takes_concurrency: bool = False  # --concurrency as its own setting
    takes_dry_run: bool = False  # --dry-run prints its plan


def common_options(args: argparse.Namespace) -> dict[str, Any]:
    """The manifest's `load` fields every workload records: lengths and timeout (no targets, one run, no prefix)."""
    return {
        "slo": [],
        "runs": 1,
        "prompt_tokens": args.prompt_tokens,
        "output_tokens": args.output_tokens,
        "prefix_tokens": 0,
        "timeout_s": args.timeout_s,
    }


def pct(x: Any) -> str:
    """A fraction as a percentage ("-" for none)."""
    return "-" if x is None else f"{x * 100:.1f}%"


def ms(x: Any) -> str:
    """Seconds as milliseconds ("-" for none)."""
    return "-" if x is None else f"{x * 1000:.1f}"
