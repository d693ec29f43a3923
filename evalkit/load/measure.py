"""`evalkit load` as one measurement of a run session: a workload's requests sent and summarized, the exit code
and the line naming the failed requests. Load runs do not resume: the command refuses an existing `--name` unless
`--fresh`.

What is sent is the workload's own: points of a rate or concurrency search (`evalkit.load.points`), a replayed
trace (`evalkit.load.trace_replay`), conversations or shared-prefix groups (`evalkit.load.chat_workloads`), each a
typed plan and a `run(ctx)`; `LoadMeasurement` gives that run the open session and ends it alike for all of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import UsageError
from evalkit.load.tokens import measure_token_scale
from evalkit.runs.failures import FailureCount, count_failures, error_words, failure_line
from evalkit.runs.rundir import MANIFEST, REQUESTS
from evalkit.runs.schemas import written_record
from evalkit.session.context import RunContext
from evalkit.session.measurement import Measured


@dataclass(frozen=True)
class LoadMeasurement:
    """One load run of `seed`: `run` sends the workload on the open run and returns its summary; `settings` are what
    the manifest records of it (`load`), and with the seed what a run of the same name must match."""

    seed: int
    settings: dict[str, Any]
    run: Callable[[RunContext], Awaitable[dict[str, Any]]]
    errors_fail: bool = False  # the summary's `errors` alone makes exit 1 (trace and session workloads)
    invalid_fails: bool = False  # a one-point run whose point is invalid is exit 1 (`fell_behind_line`)
    kind: str = "load"
    scope: dict[str, Any] | None = None

    @property
    def manifest(self) -> dict[str, Any]:
        return {"seed": self.seed, "load": self.settings}

    @property
    def options(self) -> dict[str, Any]:
        return {"--seed": self.seed, **self.settings}

    async def measure(self, ctx: RunContext) -> Measured:
        summary = await self.run(ctx)
        measured = [x for x in ctx.rundir.read(REQUESTS) if x.get("phase") == "measured"]
        failed = load_failure_line(
            count_failures(
                (error_words(x.get("error"), x.get("error_kind")) for x in measured if x.get("outcome") == "error"),
                len(measured),
            ),
            [ctx.profile.api_key],
        )
        behind = fell_behind_line(summary) if self.invalid_fails else None
        code = 1 if failed or behind or (self.errors_fail and summary.get("errors")) else 0
        return Measured(written_record(summary), code, failure=failed or behind)


def fell_behind_line(summary: dict[str, Any]) -> str | None:
    """The exit-1 line of a one-point load run whose point is invalid: the client fell behind, so its latencies (and
    whether it meets the targets) describe the client, not the server. None otherwise; a search's invalid points
    are rows of its table (`valid no`), its answer a valid point."""
    invalid = (summary.get("client") or {}).get("invalid_points") or []
    if not invalid or summary.get("search"):
        return None
    reasons = "; ".join(f"{p['load']:g}: {', '.join(p['reasons'])}" for p in invalid)
    return (
        "load: invalid: the client fell behind, so this point's latencies describe the client, not the server "
        f"({reasons}); add --client-procs N, or measure a lower load"
    )


def load_failure_line(count: FailureCount, secrets: list[str | None]) -> str | None:
    """The exit-1 line of a load run with failed requests (load runs do not resume)."""
    return failure_line("load", count, secrets, then="load runs do not resume: add --fresh to measure again")


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
