"""`evalkit load --trace FILE` as a workload of a run session: the trace's requests replayed open loop as one load
point of the usual summary, with its own `trace` figures (send error, prefix-cache hit rate against an unbounded
cache's). `TraceReplay` is its plan and sender (`evalkit.load.measure.WorkloadPlan`)."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import ClassVar

from evalkit.load.cache_metrics import metrics_hit_rate
from evalkit.load.measure import run_token_scale
from evalkit.load.records import LoadSettings, TraceSettings, common_settings
from evalkit.load.runner import LoadRunner, PointProgress, PointRun
from evalkit.load.summary import POINTS, build_summary
from evalkit.load.summary_records import LoadSummaryJson, with_evidence
from evalkit.load.trace import MOONCAKE_BLOCK_TOKENS, TraceLine, TraceOptions, ideal_hit_tokens, select
from evalkit.load.trace import trace_plan as make_trace_plan
from evalkit.load.turns import hit_rate
from evalkit.runs.rundir import utc_now_iso
from evalkit.session.context import RunContext


@dataclass(frozen=True)
class TraceReplay:
    """The trace's `lines` (as read from `file`), which of them to send and how (`speedup`, the `window` of trace
    seconds, the `sample` fraction, prompt tokens per hash id), the targets it is judged on (as written) and the
    lengths the manifest records beside them."""

    errors_fail: ClassVar[bool] = True
    invalid_fails: ClassVar[bool] = False

    lines: list[TraceLine]
    file: str
    speedup: float = 1.0
    window: tuple[float, float | None] = (0.0, None)
    sample: float = 1.0
    block_tokens: int = MOONCAKE_BLOCK_TOKENS
    slo: tuple[str, ...] = ()
    prompt_tokens: str = "256"
    output_tokens: str = "64"
    token_scale: float | None = None  # None: measured against the server first
    timeout_s: float = 300.0

    def options(self, seed: int) -> TraceOptions:
        """How to replay the trace in the run of `seed`."""
        return TraceOptions(self.speedup, self.window, self.sample, self.block_tokens, seed)

    def figures(self) -> TraceSettings:
        """What the manifest and summary record of the trace."""
        return {
            "file": self.file,
            "speedup": self.speedup,
            "window_s": list(self.window),
            "sample": self.sample,
            "block_tokens": self.block_tokens,
        }

    def settings(self) -> LoadSettings:
        """What the manifest records of the run (`load`)."""
        out = common_settings(self.prompt_tokens, self.output_tokens, self.timeout_s)
        out["slo"] = list(self.slo)
        out["mode"], out["arrivals"], out["trace"] = "rate", "trace", self.figures()
        return out

    async def send(self, ctx: RunContext, seed: int) -> LoadSummaryJson:
        """Send the trace and summarize it."""
        return await measure_trace(self, ctx, seed)


async def measure_trace(replay: TraceReplay, ctx: RunContext, seed: int) -> LoadSummaryJson:
    """Send the trace and summarize it."""
    lines, opts = replay.lines, replay.options(seed)
    scale = await run_token_scale(ctx, replay.token_scale)
    plan = make_trace_plan(lines, opts, scale)  # every prompt built before the first send
    runner = LoadRunner(ctx.rundir, ctx.client, ctx.clock, replay.timeout_s)
    point = PointRun(0, plan)
    t0 = utc_now_iso()
    # A full collection walking the thousands of prompts built in advance pauses the loop for milliseconds, and
    # sends are due every 5 ms at 200/s: they live until the end of the run, so they are kept out of its walks.
    gc.collect()
    gc.freeze()
    try:
        with PointProgress(point, "load trace"):
            await runner.run_point(point)
    finally:
        gc.unfreeze()
        runner.close()
    await ctx.evidence.snapshot("trace")
    ctx.rundir.append(
        POINTS,
        {
            "point": 0,
            "mode": "rate",
            "load": plan.spec.load,
            "repeat": 0,
            "key": "trace",
            "started": t0,
            "finished": utc_now_iso(),
        },
    )
    await ctx.evidence.end()
    summary = with_evidence(build_summary(ctx.rundir.path), ctx.rundir.path)
    hit, total = ideal_hit_tokens(select(lines, opts), opts.block_tokens)
    measured = point.measured()
    errors = [abs(e) for x in measured if (e := x.get("send_lateness_s")) is not None]
    summary["trace"] = {
        **replay.figures(),
        "lines_in_file": len(lines),
        "requests_sent": len(measured),
        "mean_rate_rps": plan.spec.load,
        "ideal_hit_rate": hit / total if total else None,
        "send_error_s": {
            "max": max(errors) if errors else None,
            "within_5ms": sum(e <= 0.005 for e in errors) / len(errors) if errors else None,
        },
        "prefix_cache": hit_rate([x for x in measured if x.get("outcome") in ("correct", "wrong")]),
        "prefix_cache_metrics": metrics_hit_rate(ctx.rundir.path),
    }
    return summary
