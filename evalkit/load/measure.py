"""`evalkit load` as one measurement of a run session: a workload's requests sent and summarized, the exit code
and the line naming the failed requests. Load runs do not resume: the command refuses an existing `--name` unless
`--fresh`.

A run is a `LoadPlan`: its seed and its workload's own typed plan (`WorkloadPlan`: points of a rate or concurrency
search, `evalkit.load.points`; a replayed trace, `evalkit.load.trace_replay`; conversations or shared-prefix groups,
`evalkit.load.chat_workloads`). Each workload's plan is its own sender: `send(ctx, seed)` sends its requests on the
open run and returns its summary, and `settings()` is what the manifest records of it. `LoadMeasurement(plan)` gives
that sender the open session and ends the run alike for all of them; a new workload is its plan type alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, cast

from evalkit.errors import UsageError
from evalkit.load.records import LoadSettings
from evalkit.load.summary_records import LoadSummaryJson
from evalkit.load.tokens import measure_token_scale
from evalkit.runs.failures import FailureCount, count_failures, error_words, failure_line
from evalkit.runs.json_value import JsonValue
from evalkit.runs.rundir import MANIFEST, REQUESTS
from evalkit.runs.schemas import written_record
from evalkit.session.context import RunContext
from evalkit.session.measurement import Measured


class WorkloadPlan(Protocol):
    """A load workload's own plan, frozen and typed, and its sender: what the manifest records of it (`settings`),
    how a run ends (`errors_fail`: the summary's `errors` alone is exit 1; `invalid_fails`: a one-point run whose
    point is invalid is exit 1) and `send`, which sends its requests on the open run and returns its summary."""

    @property
    def errors_fail(self) -> bool: ...

    @property
    def invalid_fails(self) -> bool: ...

    def settings(self) -> LoadSettings: ...

    async def send(self, ctx: RunContext, seed: int) -> LoadSummaryJson: ...


@dataclass(frozen=True)
class LoadPlan:
    """One load run: its seed (every prompt, length and arrival) and its workload's plan."""

    workload: WorkloadPlan
    seed: int = 42

    def measurement(self) -> LoadMeasurement:
        """The run of this plan a session measures."""
        return LoadMeasurement(self)


@dataclass(frozen=True)
class LoadMeasurement:
    """The session's measurement of a `LoadPlan`: its workload sent and summarized; the manifest records the seed
    and the workload's settings (`load`), which with the seed are what a run of the same name must match."""

    plan: LoadPlan

    @property
    def kind(self) -> Literal["load"]:
        """The run's kind."""
        return "load"

    @property
    def scope(self) -> None:
        """Nothing to resume into: load runs do not resume."""
        return None

    @property
    def manifest(self) -> dict[str, JsonValue]:
        """The manifest's fields of the run: its seed and the workload's settings (`load`, JSON by its type)."""
        return {"seed": self.plan.seed, "load": cast(JsonValue, self.plan.workload.settings())}

    @property
    def options(self) -> dict[str, JsonValue]:
        """What a run of the same name must match: the seed, then the workload's settings."""
        return {"--seed": self.plan.seed, **cast(dict[str, JsonValue], self.plan.workload.settings())}

    async def measure(self, ctx: RunContext) -> Measured:
        """Send the workload on the open run; its summary, exit code and failure line."""
        workload = self.plan.workload
        summary = await workload.send(ctx, self.plan.seed)
        measured = [x for x in ctx.rundir.read(REQUESTS) if x.get("phase") == "measured"]
        failed = load_failure_line(
            count_failures(
                (error_words(x.get("error"), x.get("error_kind")) for x in measured if x.get("outcome") == "error"),
                len(measured),
            )
        )
        behind = fell_behind_line(summary) if workload.invalid_fails else None
        code = 1 if failed or behind or (workload.errors_fail and summary.get("errors")) else 0
        return Measured(written_record(dict(summary)), code, failure=failed or behind)


def fell_behind_line(summary: LoadSummaryJson) -> str | None:
    """The exit-1 line of a one-point load run whose point is invalid: the client fell behind, so its latencies (and
    whether it meets the targets) describe the client, not the server. None otherwise; a search's invalid points
    are rows of its table (`valid no`), its answer a valid point."""
    client = summary.get("client")
    invalid = (client or {}).get("invalid_points") or []
    if not invalid or summary.get("search"):
        return None
    reasons = "; ".join(f"{p['load']:g}: {', '.join(p['reasons'])}" for p in invalid)
    return (
        "load: invalid: the client fell behind, so this point's latencies describe the client, not the server "
        f"({reasons}); add --client-procs N, or measure a lower load"
    )


def load_failure_line(count: FailureCount) -> str | None:
    """The exit-1 line of a load run with failed requests (load runs do not resume)."""
    return failure_line("load", count, then="load runs do not resume: add --fresh to measure again")


def refuse_existing(out: Path | str, name: str | None, fresh: bool) -> None:
    """Load runs do not resume: an existing --name is refused before any request, unless --fresh."""
    if name and not fresh and (Path(out) / name / MANIFEST).exists():
        raise UsageError(
            f"{Path(out) / name} exists; load runs do not resume: pick another --name, or add --fresh "
            "to measure again (its old files are deleted)"
        )


async def run_token_scale(ctx: RunContext, given: float | None) -> float:
    """The run's token scale: `given` (`--token-scale`), else measured against the server; recorded in the manifest."""
    if given is not None:
        ctx.rundir.update_manifest(token_scale=given, tokenization={"method": "--token-scale"})
        return float(given)
    scale, how = await measure_token_scale(ctx.client)
    ctx.rundir.update_manifest(token_scale=scale, tokenization=how)
    return scale
