"""A run's whole life in one place: open the run directory against the target, measure, write the summary, finish.

Every server-facing measurement (bench, capability, stress, load) is a `Measurement`: what defines it (its manifest
fields, the options a resume must match, the scope of what is asked) and one `measure(ctx)` that runs it and returns
its summary with its exit code. `run_measurement` does the rest the same way for all of them: the run directory
(created, or resumed when it is the same run: `evalkit.runs.run_identity`), the client and its preflight, the
server's evidence, `summary.json`, the manifest's finish, the table, the run directory's path as the last line of
standard output (the contract), and the exit-1 line naming what failed. A complete run started again prints its own
table and exits with its own code, measuring nothing.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from evalkit.config.target import Target
from evalkit.redact import scrub
from evalkit.runs import machine_probe
from evalkit.runs.json_value import JsonValue
from evalkit.runs.rundir import SUMMARY, RunDir, RunFinished
from evalkit.runs.schemas import KindSummary, summary_record
from evalkit.session.context import RunContext, RunDirOptions, open_run


@dataclass(frozen=True)
class Measured:
    """What a measurement leaves: its summary (its kind's record, `schemas.written_record`: what summary.json holds
    and a reader reads back), exit code, whether anything is left to redo (`complete`), why it stopped (stress:
    `completed`, `interrupted`, `max_minutes`; None where a kind does not say) and the exit-1 line naming the
    failures (None when nothing failed)."""

    summary: KindSummary
    exit_code: int
    complete: bool = True
    stopped: str | None = None
    failure: str | None = None


@dataclass(frozen=True)
class RunResult:
    """A run as the command ends it: its summary, directory, exit code and failure line; `again` when it was a
    complete run started again (nothing measured)."""

    summary: KindSummary
    path: Path
    exit_code: int
    failure: str | None = None
    again: bool = False


Show = Callable[[KindSummary], None]  # a command's table of the run's summary record


class Measurement(Protocol):
    """One kind of measurement, planned and validated: what defines its run, and how it is measured."""

    @property
    def kind(self) -> str: ...  # bench | capability | stress | load

    @property
    def manifest(self) -> dict[str, JsonValue]: ...  # the kind's fields of manifest.json

    @property
    def options(self) -> dict[str, JsonValue]: ...  # the flags a resume must match (`runs.run_identity`)

    @property
    def scope(self) -> dict[str, JsonValue] | None: ...  # what is asked; a complete run asked for more resumes

    async def measure(self, ctx: RunContext) -> Measured: ...


def finish_run(rundir: RunDir, got: Measured) -> RunResult:
    """Write the run's `summary.json` and stamp its finish in the manifest (a replay, which has no server, too); the
    failure line is scrubbed of every secret the run directory holds (the API key in each form it may be echoed)."""
    rundir.write_summary(got.summary.to_json())
    rundir.update_manifest(machine_end=machine_probe.probe())
    closing = {"stopped": got.stopped} if got.stopped is not None else {}
    rundir.finish(exit_code=got.exit_code, complete=got.complete, **closing)
    failure = scrub(got.failure, rundir.secrets) if got.failure is not None else None
    return RunResult(got.summary, rundir.path, got.exit_code, failure)


def started_again(done: RunFinished) -> RunResult:
    """A complete run started again: said in one line, and returned as it is."""
    done.say()
    return RunResult(summary_record(done.summary, done.path / SUMMARY), done.path, done.exit_code, again=True)


def show_result(result: RunResult, show: Show) -> int:
    """The run's table (`show`), its path as the last line of standard output, the failure line on standard error;
    the exit code."""
    show(result.summary)
    print(result.path, flush=True)
    if result.failure is not None:
        print(result.failure, file=sys.stderr, flush=True)
    return result.exit_code


async def _measured(target: Target, where: RunDirOptions, m: Measurement) -> RunResult:
    async with open_run(target, where, m.kind, m.manifest, m.options, m.scope) as ctx:
        return finish_run(ctx.rundir, await m.measure(ctx))


def measure_run(target: Target, where: RunDirOptions, m: Measurement) -> RunResult:
    """Measure (or resume) the run and finish it; a complete run started again is said and returned as it is."""
    try:
        return asyncio.run(_measured(target, where, m))
    except RunFinished as done:
        return started_again(done)


def run_measurement(target: Target, where: RunDirOptions, m: Measurement, show: Show) -> int:
    """`measure_run`, then `show_result`; the exit code."""
    return show_result(measure_run(target, where, m), show)
