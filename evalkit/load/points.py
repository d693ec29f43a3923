"""`evalkit load --rate/--concurrency [--search]`: points of one load each, measured `runs` times, or a search for
the highest load that still meets every target; the measurement a run session runs.

`PointTemplate` turns a point's spec (mode, load, repeat) into its `PointPlan` with the run's shaping
(`ArrivalShaping`); `PointsPlan` is the validated plan of the whole run, what the manifest records of it and its
sender (`evalkit.load.measure.WorkloadPlan`).
"""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass
from typing import ClassVar

from evalkit.load.arrivals import Stage
from evalkit.load.client_hosts import RayClientHosts, host_spec
from evalkit.load.measure import run_token_scale
from evalkit.load.metrics import judge_point, point_metrics
from evalkit.load.precision import PrecisionStop
from evalkit.load.records import LoadSettings
from evalkit.load.runner import LoadRunner, PointProgress, PointRun
from evalkit.load.schedule import PointPlan, PointSpec
from evalkit.load.search import search_max
from evalkit.load.slo import Target as SloTarget
from evalkit.load.slo import parse_target
from evalkit.load.summary import POINTS, build_summary
from evalkit.load.summary_records import LoadSummaryJson, PointMetrics, PointVerdict, with_evidence
from evalkit.load.workload import Lengths, Workload
from evalkit.runs.rundir import utc_now_iso
from evalkit.session.context import RunContext


@dataclass(frozen=True)
class ArrivalShaping:
    """How a point's sends are shaped and held: gamma burstiness, bursts, a ramp, stages, caps on requests in flight
    or in prefill, the precision stop, and room for reasoning (`PointPlan`'s fields of the same names)."""

    burstiness: float = 1.0
    burst_size: int = 1
    ramp_up_s: float = 0.0
    stages: tuple[Stage, ...] = ()
    max_concurrency: int | None = None
    max_prefill: int | None = None
    precision: PrecisionStop | None = None
    reasoning_room: int = 0


@dataclass(frozen=True)
class PointTemplate:
    """What every point of a run shares: its warm-up, length (`requests` or `duration_s`), arrival process and
    shaping (bursts, ramps, stages, caps, the precision stop)."""

    arrivals: str
    warmup: int | None = None  # None: the load itself (concurrency), else max(2, ceil(rate))
    requests: int | None = None  # None: 50, unless `duration_s` bounds the point
    duration_s: float | None = None
    shaping: ArrivalShaping = ArrivalShaping()

    def plan(self, workload: Workload, spec: PointSpec, seed: int) -> PointPlan:
        """The plan of the point `spec` of the run of `seed`."""
        if self.warmup is not None:
            warmup = self.warmup
        else:
            warmup = int(spec.load) if spec.mode == "concurrency" else max(2, math.ceil(spec.load))
        sh = self.shaping
        measured = None if self.duration_s is not None else (self.requests or 50)
        if sh.stages:
            measured = None  # the point ends with its last stage
        elif sh.precision is not None:
            measured = sh.precision.max_requests  # the most a precision stop lets the point measure
        return PointPlan(
            seed=seed,
            spec=spec,
            workload=workload,
            warmup=warmup,
            duration_s=self.duration_s,
            arrivals=self.arrivals,
            measured=measured,
            burstiness=sh.burstiness,
            burst_size=sh.burst_size,
            ramp_up_s=sh.ramp_up_s,
            stages=sh.stages,
            max_concurrency=sh.max_concurrency,
            max_prefill=sh.max_prefill,
            precision=sh.precision,
            reasoning_room=sh.reasoning_room,
        )


@dataclass(frozen=True)
class ClientHostsPlan:
    """`--ray ADDRESS --client-hosts N`: the open-loop sends spread over N hosts of a Ray cluster."""

    address: str
    count: int


@dataclass(frozen=True)
class PointsPlan:
    """A run of points: at `start` (`runs` repeats), or with `search` up to `search_max` to `resolution`; requests
    of `prompt_tokens` and `output_tokens` (N or LO:HI) with a shared prefix, judged on the `slo` targets (as
    written). Checked where it is made: a bad target or length is a UsageError."""

    errors_fail: ClassVar[bool] = False
    invalid_fails: ClassVar[bool] = True  # a one-point run whose point is invalid is exit 1

    mode: str  # rate | concurrency
    start: float
    template: PointTemplate
    prompt_tokens: str = "256"
    output_tokens: str = "64"
    prefix_tokens: int = 0
    slo: tuple[str, ...] = ()
    runs: int = 1
    search: bool = False
    search_max: float | None = None  # None: 256 streams or 1,000 requests a second
    resolution: float = 0.1  # a rate search stops when its bracket is this fraction of the rate
    token_scale: float | None = None  # None: measured against the server first
    timeout_s: float = 300.0
    hosts: ClientHostsPlan | None = None  # None: sent from this process (`--client-procs` spreads its reading)

    def __post_init__(self) -> None:
        _ = self.targets, self.workload  # a bad target, then a bad length, is refused here

    @property
    def targets(self) -> tuple[SloTarget, ...]:
        """The `slo` targets, parsed."""
        return tuple(parse_target(s) for s in self.slo)

    @property
    def workload(self) -> Workload:
        """The request mix (at the given token scale, or 1 until the run measures it)."""
        return Workload(
            Lengths.parse(self.prompt_tokens, "--prompt-tokens"),
            Lengths.parse(self.output_tokens, "--output-tokens"),
            self.prefix_tokens,
            self.token_scale or 1.0,
        )

    def settings(self) -> LoadSettings:
        """What the manifest records of the run (`load`)."""
        t, sh = self.template, self.template.shaping
        out: LoadSettings = {
            "mode": self.mode,
            "start_load": self.start,
            "search": self.mode if self.search else None,
            "runs": self.runs,
            "slo": list(self.slo),
            "arrivals": t.arrivals,
            "requests": t.requests,
            "duration_s": t.duration_s,
            "warmup": t.warmup,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "prefix_tokens": self.prefix_tokens,
            "timeout_s": self.timeout_s,
            "search_max": self.search_max,
            "resolution": self.resolution,
            "burstiness": sh.burstiness,
            "burst_size": sh.burst_size,
            "ramp_up_s": sh.ramp_up_s,
            "stages": [s.to_json() for s in sh.stages] if sh.stages else None,
            "max_concurrency": sh.max_concurrency,
            "max_prefill": sh.max_prefill,
            "precision": sh.precision.to_json() if sh.precision else None,
            "reasoning_room": sh.reasoning_room,
        }
        if self.hosts is not None:
            out["client_hosts"] = self.hosts.count
        return out

    async def send(self, ctx: RunContext, seed: int) -> LoadSummaryJson:
        """Send the points on the open run; its summary."""
        return await measure_points(self, ctx, seed)


async def measure_points(plan: PointsPlan, ctx: RunContext, seed: int) -> LoadSummaryJson:
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
    mode, targets = plan.mode, list(plan.targets)
    next_id = [0]

    async def measure(load: float) -> bool:
        reps: list[PointMetrics] = []
        for repeat in range(plan.runs):
            spec = PointSpec(mode, load, repeat)
            point = PointRun(next_id[0], plan.template.plan(workload, spec, seed))
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
    return with_evidence(build_summary(ctx.rundir.path), ctx.rundir.path)


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")


def _progress(mode: str, load: float, reps: list[PointMetrics], verdict: PointVerdict) -> None:
    ttft = [r["ttft_s"]["p99"] for r in reps]
    if not verdict["checks"]:  # no --slo: nothing to meet, so neither "meets" nor "misses"
        state = "no --slo targets to meet"
    else:
        state = "meets targets" if verdict["meets_slo"] else "misses targets"
    if not verdict["valid"]:
        state += " (invalid: the client fell behind)"
    sys.stderr.write(f"load {mode} {load:g}: ttft p99 {', '.join(short_figure(x) for x in ttft)} s; {state}\n")


def short_figure(x: float | None, digits: int = 3) -> str:
    """A figure to `digits` significant digits, "-" for none (the progress line's and the load table's)."""
    return "-" if x is None else f"{x:.{digits}g}"
