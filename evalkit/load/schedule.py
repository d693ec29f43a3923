"""The seeded plan of one load point: which requests, and for open loop when each is sent (computed in advance).

Open-loop send times are offsets from the point's start on one absolute timeline (evalkit/load/arrivals.py:
constant spacing 1/R, Poisson or gamma gaps drawn from the seed, bursts, a linear ramp-up, or stages), so a client
that is late for one request is not late for the next: nothing drifts. Caps on requests in flight or in prefill
(`max_concurrency`, `max_prefill`) hold a send back until a slot frees; the runner records that wait apart. A
point is named by its key `<seed>:<mode>:<load>:<repeat>`; the same key gives the same plan, and `render_plan`
prints it byte for byte the same (what `--dry-run` shows).
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.load.arrivals import ARRIVALS, GapProcess, RateProfile, Stage, send_times, stages_profile
from evalkit.load.precision import PrecisionStop
from evalkit.load.workload import LoadRequest, Workload, build_request, shared_prefix

MODES = ("concurrency", "rate")
__all__ = ["ARRIVALS", "MODES", "PointPlan", "PointSpec", "render_plan"]


@dataclass(frozen=True)
class PointSpec:
    """One load point: closed loop at `load` streams, or open loop at `load` requests per second."""

    mode: str  # concurrency | rate
    load: float
    repeat: int = 0

    def key(self, seed: int) -> str:
        """The seed of everything this point sends."""
        return f"{seed}:{self.mode}:{self.load:g}:{self.repeat}"

    @property
    def label(self) -> str:
        """`c=4` or `r=2.5/s`."""
        return f"c={self.load:g}" if self.mode == "concurrency" else f"r={self.load:g}/s"


@dataclass(frozen=True)
class PointPlan:
    """The plan of a point: the seed, the mix and how many requests are warm-up and measured."""

    seed: int
    spec: PointSpec
    workload: Workload
    warmup: int
    measured: int | None  # None: as many as `duration_s` lets the point send
    duration_s: float | None
    arrivals: str = "constant"
    burstiness: float = 1.0  # gamma arrivals: the shape (vLLM's --burstiness); gaps' CV = 1/sqrt(burstiness)
    burst_size: int = 1  # requests sent at one instant; bursts spaced so the mean rate holds
    ramp_up_s: float = 0.0  # the rate rises linearly from 0 over this many seconds
    stages: tuple[Stage, ...] = ()  # a multi-stage profile instead of one rate: the point ends with its last stage
    max_concurrency: int | None = None  # open loop: no more than this many requests in flight
    max_prefill: int | None = None  # no more than this many requests sent and still without a first token
    precision: PrecisionStop | None = None  # end the measured phase once the interval is tight enough
    reasoning_room: int = 0  # tokens added to each request's max_tokens for a server that reasons first

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "_prefix", shared_prefix(self.seed, round(self.workload.prefix_tokens / self.workload.token_scale))
        )

    def request(self, index: int) -> LoadRequest:
        """Request `index` (warm-up first, then measured, then closed loop's cool-down)."""
        return build_request(self.workload, self._prefix, self.spec.key(self.seed), index)  # type: ignore[attr-defined]  # field set in __post_init__ through object.__setattr__ (frozen)

    def phase(self, index: int) -> str:
        """`warmup`, `measured` or `cooldown` by index (duration-bound points decide by time instead)."""
        if index < self.warmup:
            return "warmup"
        if self.measured is None or index < self.warmup + self.measured:
            return "measured"
        return "cooldown"

    def send_schedule(self) -> list[tuple[float, int]]:
        """Open loop: (send time from the point's start, stage) of each request, warm-up included; closed: empty."""
        if self.spec.mode != "rate":
            return []
        gaps = GapProcess(self.arrivals, self.burstiness, self.burst_size)
        profile = (
            stages_profile(list(self.stages)) if self.stages else RateProfile.constant(self.spec.load, self.ramp_up_s)
        )
        out: list[tuple[float, int]] = []
        measured_start: float | None = None
        for i, (t, stage) in enumerate(send_times(profile, gaps, self.spec.key(self.seed))):
            if self.measured is not None and i >= self.warmup + self.measured:
                break
            if i == self.warmup:
                measured_start = t
            # The epsilon keeps a send that falls exactly on the end (in exact arithmetic) out of the window.
            if (
                self.duration_s is not None
                and measured_start is not None
                and t >= measured_start + self.duration_s - 1e-9
            ):
                break
            if self.measured is None and self.duration_s is None and not profile.finite:
                raise ValueError("an open-ended rate needs a request count or a duration")
            out.append((t, stage))
        return out

    def send_offsets(self) -> list[float]:
        """Open loop: each request's send time from the point's start (warm-up included); closed loop: empty."""
        return [t for t, _ in self.send_schedule()]

    def send_stages(self) -> list[int]:
        """Open loop: the stage each request is sent in (all 0 without stages)."""
        return [st for _, st in self.send_schedule()]

    @property
    def shaping(self) -> str:
        """The arrivals and caps in words, for the plan's header."""
        parts = [f"arrivals {self.arrivals}"] if self.spec.mode == "rate" else []
        if self.arrivals == "gamma" and self.spec.mode == "rate":
            parts.append(f"burstiness {self.burstiness:g}")
        if self.burst_size > 1:
            parts.append(f"bursts of {self.burst_size}")
        if self.ramp_up_s:
            parts.append(f"ramp-up {self.ramp_up_s:g} s")
        if self.stages:
            parts.append("stages " + ",".join(_stage_text(st) for st in self.stages))
        if self.max_concurrency:
            parts.append(f"max concurrency {self.max_concurrency}")
        if self.max_prefill:
            parts.append(f"max in prefill {self.max_prefill}")
        if self.precision:
            parts.append(f"target moe {self.precision.describe()}")
        return ", ".join(parts)


def _stage_text(st: Stage) -> str:
    rate = f"{st.start_rate:g}-{st.rate:g}" if st.start_rate is not None else f"{st.rate:g}"
    return f"{rate}:{st.duration_s:g}"


def render_plan(plan: PointPlan, limit: int | None = None) -> str:
    """The plan as text: a header, then one line per request (closed loop: the order the streams take them)."""
    s = plan.spec
    offsets = plan.send_offsets()
    total = len(offsets) if s.mode == "rate" else (plan.warmup + plan.measured if plan.measured is not None else None)
    shown = total if total is not None else (limit or plan.warmup + 8 * int(s.load))
    if limit is not None:
        shown = min(shown, limit)
    w = plan.workload
    lines = [
        f"# evalkit load plan: seed {plan.seed}, {s.mode} {s.load:g}, repeat {s.repeat}, key {s.key(plan.seed)}",
        f"# prompt_tokens {w.prompt_tokens}, output_tokens {w.output_tokens}, prefix_tokens {w.prefix_tokens}, "
        f"token_scale {w.token_scale:.4f}, "
        f"warmup {plan.warmup}, "
        + (
            f"requests {plan.measured}"
            if plan.measured is not None
            else f"duration {plan.duration_s:g} s"
            if plan.duration_s is not None
            else "until the last stage ends"
        )
        + (f", {plan.shaping}" if plan.shaping else ""),
        "index  phase     send_at_s  prompt_tokens  output_tokens  count_to  prompt_sha",
    ]
    for i in range(shown):
        r = plan.request(i)
        at = f"{offsets[i]:9.4f}" if s.mode == "rate" else "        -"
        phase = plan.phase(i) if s.mode == "rate" or plan.measured is not None or i < plan.warmup else "measured"
        lines.append(
            f"{i:5d}  {phase:<8}  {at}  {r.prompt_tokens:13d}  {r.output_tokens:13d}  {r.count_to:8d}  {r.digest()}"
        )
    if total is None:
        lines.append(f"# ... the streams take requests in this order until {plan.duration_s:g} s have passed")
    return "\n".join(lines) + "\n"
