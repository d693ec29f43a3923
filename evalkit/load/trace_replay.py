"""`evalkit load --trace FILE` as a measurement of a run session: the trace's requests replayed open loop as one load
point of the usual summary, with its own `trace` figures (send error, prefix-cache hit rate against an unbounded
cache's)."""

from __future__ import annotations

import gc
from dataclasses import dataclass
from typing import Any

from evalkit.evidence.capture import evidence_summary
from evalkit.load.cache_metrics import metrics_hit_rate
from evalkit.load.measure import LoadMeasurement, run_token_scale
from evalkit.load.runner import LoadRunner, PointProgress, PointRun
from evalkit.load.summary import POINTS, build_summary
from evalkit.load.trace import TraceOptions, ideal_hit_tokens, select
from evalkit.load.trace import trace_plan as make_trace_plan
from evalkit.load.turns import hit_rate
from evalkit.runs.rundir import utc_now_iso
from evalkit.session.context import RunContext


@dataclass(frozen=True)
class TraceReplay:
    """The trace's `lines` (as read), which of them to send and how (`opts`), and what summary.json records of it
    (`figures`: file, speedup, window, sample, block tokens)."""

    lines: list[Any]
    opts: TraceOptions
    figures: dict[str, Any]
    token_scale: float | None = None  # None: measured against the server first
    timeout_s: float = 300.0


def trace_measurement(replay: TraceReplay, seed: int, options: dict[str, Any]) -> LoadMeasurement:
    """The session's measurement of `replay`; `options` are what the manifest records of it (`load`)."""

    async def run(ctx: RunContext) -> dict[str, Any]:
        return await measure_trace(replay, ctx)

    return LoadMeasurement(seed, options, run, errors_fail=True)


async def measure_trace(replay: TraceReplay, ctx: RunContext) -> dict[str, Any]:
    """Send the trace and summarize it."""
    lines, opts = replay.lines, replay.opts
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
    summary = {**build_summary(ctx.rundir.path), **evidence_summary(ctx.rundir.path)}
    hit, total = ideal_hit_tokens(select(lines, opts), opts.block_tokens)
    measured = point.measured()
    errors = [abs(x["send_lateness_s"]) for x in measured if x.get("send_lateness_s") is not None]
    summary["trace"] = {
        **replay.figures,
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
