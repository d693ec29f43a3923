"""The workloads of `evalkit load` that shape their own load instead of `--rate` / `--concurrency`: trace replay
(load_trace.py), conversations and shared-prefix groups (load_chats.py), shaped as users make them (issue 31).

A workload is one module of the command layer (its flags, its plan from them, its run and its table; what it
sends lives in evalkit/load/) listed in `BUILTIN`: adding one is that module plus its line here; `register` adds
one for this process (tests). This module checks what all of them share: one workload at a time, no rate or
search beside it, targets and dry runs only where the workload takes them.
"""

from __future__ import annotations

import argparse
from typing import Protocol

from evalkit.commands import load_chats, load_trace
from evalkit.commands.load_workload_parts import LoadWorkload
from evalkit.errors import UsageError
from evalkit.load.measure import refuse_existing


class WorkloadModule(Protocol):
    """What a workload module holds: its flags and its workloads."""

    WORKLOADS: tuple[LoadWorkload, ...]

    def add_arguments(self, p: argparse.ArgumentParser) -> None: ...


BUILTIN: tuple[WorkloadModule, ...] = (load_trace, load_chats)

_EXTRA: list[WorkloadModule] = []  # registered at run time (tests)


def register(module: WorkloadModule) -> WorkloadModule:
    """Add a workload module for this process (its flags join `evalkit load`'s when the parser is built)."""
    if module not in _EXTRA:
        _EXTRA.append(module)
    return module


def modules() -> tuple[WorkloadModule, ...]:
    """Every workload module: the built-ins, then run-time ones as registered."""
    return (*BUILTIN, *_EXTRA)


def workloads() -> list[LoadWorkload]:
    """Every workload, in the order of their modules."""
    return [w for m in modules() for w in m.WORKLOADS]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Every workload's flags."""
    for m in modules():
        m.add_arguments(p)


def wanted(args: argparse.Namespace) -> bool:
    """Whether the command line asks for one of these workloads."""
    return any(getattr(args, w.dest, None) for w in workloads())


def _listed(flags: list[str], last: str) -> str:
    return ", ".join(flags[:-1]) + f" {last} {flags[-1]}" if len(flags) > 1 else flags[0]


def run(args: argparse.Namespace) -> int:
    """Check the flags, then run the workload asked for."""
    chosen = [w for w in workloads() if getattr(args, w.dest, None)]
    if len(chosen) > 1:
        raise UsageError(f"give one of {', '.join(w.flag for w in chosen)}")
    w = chosen[0]
    if args.search or args.rate is not None or (args.concurrency is not None and not w.takes_concurrency):
        raise UsageError(f"{w.flag} sets its own load: drop --search, --rate and --concurrency")
    if args.slo and not w.takes_slo:
        takers = [x.flag for x in workloads() if x.takes_slo]
        raise UsageError(f"--slo targets apply to {_listed(['--rate', '--concurrency', *takers], 'and')} runs")
    refuse_existing(args.out, args.name, args.fresh)
    if args.dry_run and not w.takes_dry_run:
        planners = [x.flag for x in workloads() if x.takes_dry_run]
        raise UsageError(f"--dry-run prints a {_listed(['--rate', '--concurrency', *planners], 'or')} plan")
    return w.run(args)
