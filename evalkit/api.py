"""evalkit as a library: run a typed plan against a server, as the CLI does, and get its summary back as a record.

    from evalkit.api import BenchPlan, run, target

    summary = run(BenchPlan(runs=3, max_tokens=512), target("http://127.0.0.1:8080/v1"), out="results", name="b1")

A plan (`BenchPlan`, `StressPlan`, `CapabilityPlan`, `LoadPlan`) is what a command builds from its flags: frozen,
typed, validated where it is made. `run` opens the session the CLI opens (the client and its preflight, the run
directory, created or resumed when it is the same run, the server's evidence), measures, writes `summary.json` and
finishes the run; it returns the summary as its kind's record (`evalkit.runs.schemas`). `measure` returns the run as
the command ends it (its directory, exit code and failure line too). Nothing is printed but what a measurement says
on standard error (progress, notes); the table and the run directory's path are the CLI's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, overload

from evalkit.bench.measure import BenchMeasurement
from evalkit.bench.throughput import BenchPlan
from evalkit.config.profiles import ServerProfile, resolve_profile
from evalkit.config.target import EvidenceOptions, Target
from evalkit.load.measure import LoadMeasurement, LoadPlan
from evalkit.runs.schemas import (
    BenchSummary,
    CapabilitySummary,
    KindSummary,
    LoadSummary,
    StressSummary,
)
from evalkit.session.context import RunDirOptions
from evalkit.session.measurement import Measurement, RunResult, measure_run
from evalkit_evals.plan import CapabilityPlan, capability_measurement
from evalkit_stress.measure import StressMeasurement
from evalkit_stress.plan import StressPlan

__all__ = ["BenchPlan", "CapabilityPlan", "LoadPlan", "StressPlan", "measure", "measurement_of", "run", "target"]


Plan = BenchPlan | StressPlan | CapabilityPlan | LoadPlan
# Each plan's measurement: the one place a plan type meets the run that measures it.
MEASUREMENTS: dict[type, Callable[[Any], Measurement]] = {
    BenchPlan: BenchMeasurement,
    StressPlan: StressMeasurement,
    CapabilityPlan: capability_measurement,
    LoadPlan: LoadMeasurement,
}


def measurement_of(plan: Plan) -> Measurement:
    """The run of `plan` a session measures."""
    make = MEASUREMENTS.get(type(plan))
    if make is None:
        raise TypeError(f"not a plan evalkit measures: {type(plan).__name__}")
    return make(plan)


def target(
    base_url: str,
    model: str | None = None,
    api_key_env: str | None = None,
    evidence: EvidenceOptions | None = None,
    client_procs: int = 1,
    timeout_s: float | None = None,
) -> Target:
    """The server to measure, as `--base-url`, `--model` and `--api-key-env` give it (the key is read from that
    environment variable, OPENAI_API_KEY by default, once, here)."""
    profile: ServerProfile = resolve_profile(None, None, base_url, model, api_key_env)
    return Target(
        profile=profile,
        evidence=evidence or EvidenceOptions(),
        client_procs=max(1, client_procs),
        timeout_s=timeout_s,
    )


def measure(plan: Plan, server: Target, where: RunDirOptions) -> RunResult:
    """Measure (or resume) the plan's run against `server` in `where`; a complete run of the same plan started again
    is returned as it is, measuring nothing."""
    return measure_run(server, where, measurement_of(plan))


@overload
def run(
    plan: BenchPlan, server: Target, out: Path | str = ..., name: str | None = ..., fresh: bool = ...
) -> BenchSummary: ...
@overload
def run(
    plan: StressPlan, server: Target, out: Path | str = ..., name: str | None = ..., fresh: bool = ...
) -> StressSummary: ...
@overload
def run(
    plan: CapabilityPlan, server: Target, out: Path | str = ..., name: str | None = ..., fresh: bool = ...
) -> CapabilitySummary: ...
@overload
def run(
    plan: LoadPlan, server: Target, out: Path | str = ..., name: str | None = ..., fresh: bool = ...
) -> LoadSummary: ...
def run(
    plan: Plan,
    server: Target,
    out: Path | str = "results",
    name: str | None = None,
    fresh: bool = False,
) -> KindSummary:
    """Measure the plan against `server` into `OUT/NAME` (a new name when None) and return its summary record, of
    the plan's kind (`BenchSummary` for a `BenchPlan` ...)."""
    return measure(plan, server, RunDirOptions(out=out, name=name, fresh=fresh)).summary
