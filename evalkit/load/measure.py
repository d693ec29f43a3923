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
from evalkit.runs.context import RunContext
from evalkit.runs.failures import FailureCount, count_failures, error_words, failure_line
from evalkit.runs.rundir import MANIFEST, REQUESTS
from evalkit.runs.schemas import written_record
from evalkit.runs.session import Measured


@dataclass(frozen=True)
class LoadMeasurement:
    """One load run of `seed`: `run` sends the workload on the open run and returns its summary; `settings` are what
    the manifest records of it (`load`), and with the seed what a run of the same name must match."""

    seed: int
    settings: dict[str, Any]
    run: Callable[[RunContext], Awaitable[dict[str, Any]]]
    errors_fail: bool = False  # the summary's `errors` alone makes exit 1 (trace and session workloads)
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
        behind = fell_behind_line(summary)
        code = 1 if failed or behind or (self.errors_fail and summary.get("errors")) else 0
        return Measured(written_record(summary), code, failure=failed or behind)


def fell_behind_line(summary: dict[str, Any]) -> str | None:
    """The exit-1 line of a load run whose answer rests on a point where the client fell behind (its latencies then
    describe the client, not the server): a single point that is invalid, or a search whose first failing load is
    invalid (the server may meet the targets there). None otherwise."""
    invalid = {p["load"]: p["reasons"] for p in (summary.get("client") or {}).get("invalid_points") or []}
    if not invalid:
        return None
    if summary.get("search"):
        bound = summary.get("first_failing_load")
        if bound not in invalid:
            return None
        at = {bound: invalid[bound]}
        what = (
            f"the search's bound, {bound:g}, is a point where the client fell behind: the server may meet the "
            "targets there"
        )
    else:
        at = invalid
        what = "the client fell behind, so this point's latencies describe the client, not the server"
    reasons = "; ".join(f"{load:g}: {', '.join(r)}" for load, r in at.items())
    return f"load: invalid: {what} ({reasons}); add --client-procs N, or measure a lower load"


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
