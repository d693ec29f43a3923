"""`evalkit load --rate/--concurrency [--search]`: points of one load each, measured `runs` times, or a search for
the highest load that still meets every target; the measurement a run session runs.

`PointTemplate` turns a point's spec (mode, load, repeat) into its `PointPlan` with the run's shaping; `PointsPlan`
is the validated plan of the whole run; `points_measurement` is what a run session sends it with
(`evalkit.session.measurement`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import Any

from evalkit.evidence.capture import evidence_summary
from evalkit.load.client_hosts import RayClientHosts, host_spec
from evalkit.load.measure import LoadMeasurement, run_token_scale
from evalkit.load.metrics import judge_point, point_metrics
from evalkit.load.runner import LoadRunner, PointProgress, PointRun
from evalkit.load.schedule import PointPlan, PointSpec
from evalkit.load.search import search_max
from evalkit.load.slo import Target as SloTarget
from evalkit.load.summary import POINTS, build_summary
from evalkit.load.workload import Workload
from evalkit.runs.rundir import utc_now_iso
from evalkit.session.context import RunContext


@dataclass(frozen=True)
class PointTemplate:
    """What every point of a run shares: its seed, warm-up, length (`requests` or `duration_s`), arrival process
    and shaping (`PointPlan` keywords: bursts, ramps, stages, caps, the precision stop)."""

    seed: int
    arrivals: str
    warmup: int | None = None  # None: the load itself (concurrency), else max(2, ceil(rate))
    requests: int | None = None  # None: 50, unless `duration_s` bounds the point
    duration_s: float | None = None
    shaping: dict[str, Any] = dataclasses.field(default_factory=dict)

    def plan(self, workload: Workload, spec: PointSpec) -> PointPlan:
        """The plan of the point `spec`."""
        if self.warmup is not None:
            warmup = self.warmup
        else:
            warmup = int(spec.load) if spec.mode == "concurrency" else max(2, math.ceil(spec.load))
        measured = None if self.duration_s is not None else (self.requests or 50)
        fields: dict[str, Any] = {"measured": measured, **self.shaping}
        return PointPlan(
            seed=self.seed,
            spec=spec,
            workload=workload,
            warmup=warmup,
            duration_s=self.duration_s,
            arrivals=self.arrivals,
            **fields,
        )


@dataclass(frozen=True)
class PointsPlan:
    """A run of points: at `start` (`runs` repeats), or with `search` up to `search_max` to `resolution`."""

    mode: str  # rate | concurrency
    start: float
    template: PointTemplate
    workload: Workload
    targets: tuple[SloTarget, ...]
    runs: int = 1
    search: bool = False
    search_max: float | None = None  # None: 256 streams or 1,000 requests a second
    resolution: float = 0.1  # a rate search stops when its bracket is this fraction of the rate
    token_scale: float | None = None  # None: measured against the server first
    timeout_s: float = 300.0
    hosts: ClientHostsPlan | None = None  # None: sent from this process (`--client-procs` spreads its reading)


@dataclass(frozen=True)
class ClientHostsPlan:
    """`--ray ADDRESS --client-hosts N`: the open-loop sends spread over N hosts of a Ray cluster."""

    address: str
    count: int


def points_measurement(plan: PointsPlan, options: dict[str, Any]) -> LoadMeasurement:
    """The session's measurement of `plan`; `options` are what the manifest records of it (`load`)."""

    async def run(ctx: RunContext) -> dict[str, Any]:
        return await measure_points(plan, ctx)

    return LoadMeasurement(plan.template.seed, options, run, invalid_fails=True)


async def measure_points(plan: PointsPlan, ctx: RunContext) -> dict[str, Any]:
    """The points of the run (a search, or one point at `start`), its summary."""
    # (a given --token-scale is the workload's already)
    workload = dataclasses.replace(plan.workload, token_scale=await run_token_scale(ctx, plan.token_scale))
    runner: LoadRunner | RayClientHosts
    if plan.hosts is None:
        runner = LoadRunner(ctx.rundir, ctx.client, ctx.clock, plan.timeout_s)
    else:
        spec = host_spec(ctx.client, ctx.profile.api_key, plan.timeout_s)
        runner = RayClientHosts.start(plan.hosts.address, plan.hosts.count, spec, ctx.clock, _say)
        runner.rundir = ctx.rundir
    mode, targets, seed = plan.mode, list(plan.targets), plan.template.seed
    next_id = [0]

    async def measure(load: float) -> bool:
        reps = []
        for repeat in range(plan.runs):
            spec = PointSpec(mode, load, repeat)
            point = PointRun(next_id[0], plan.template.plan(workload, spec))
            next_id[0] += 1
            t0 = utc_now_iso()
            with PointProgress(
                point, f"load {mode} {load:g}" + (f" repeat {repeat + 1}/{plan.runs}" if plan.runs > 1 else "")
            ):
                await runner.run_point(point)
            await ctx.evidence.snapshot(f"{spec.label} repeat {repeat}")  # the server's counters per point
            m = point_metrics(point.measured(), mode, load, targets)
            reps.append(m)
            ctx.rundir.append(
                POINTS,
                {
                    "point": point.point_id,
                    "mode": mode,
                    "load": load,
                    "repeat": repeat,
                    "key": spec.key(seed),
                    "started": t0,
                    "finished": utc_now_iso(),
                    "valid": m["valid"],
                    "invalid_reasons": m["invalid_reasons"],
                    "measured_requests": len(point.measured()),
                    "stopped_on_precision": point.stopped_early,
                },
            )
        verdict = judge_point(reps, targets)
        _progress(mode, load, reps, verdict)
        return bool(verdict["meets_slo"])

    try:
        if plan.search:
            top = plan.search_max or (256.0 if mode == "concurrency" else 1000.0)
            await search_max(measure, plan.start, top, integer=mode == "concurrency", resolution=plan.resolution)
        else:
            await measure(plan.start)
    finally:
        runner.close()
    await ctx.evidence.end()
    return {**build_summary(ctx.rundir.path), **evidence_summary(ctx.rundir.path)}


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")


def _progress(mode: str, load: float, reps: list[dict[str, Any]], verdict: dict[str, Any]) -> None:
    ttft = [r["ttft_s"]["p99"] for r in reps]
    if not verdict["checks"]:  # no --slo: nothing to meet, so neither "meets" nor "misses"
        state = "no --slo targets to meet"
    else:
        state = "meets targets" if verdict["meets_slo"] else "misses targets"
    if not verdict["valid"]:
        state += " (invalid: the client fell behind)"
    sys.stderr.write(f"load {mode} {load:g}: ttft p99 {', '.join(short_figure(x) for x in ttft)} s; {state}\n")


def short_figure(x: Any, digits: int = 3) -> str:
    """A figure to `digits` significant digits, "-" for none (the progress line's and the load table's)."""
    return "-" if x is None else f"{x:.{digits}g}"
