"""What the workloads of `evalkit load` (evalkit/commands/load_workloads.py) share: the entry each module lists,
and the figures of their tables (the manifest's common lengths are evalkit.load.records.common_settings)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


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


def pct(x: float | None) -> str:
    """A fraction as a percentage ("-" for none)."""
    return "-" if x is None else f"{x * 100:.1f}%"


def ms(x: float | None) -> str:
    """Seconds as milliseconds ("-" for none)."""
    return "-" if x is None else f"{x * 1000:.1f}"
