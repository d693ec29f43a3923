"""The seeded plan of one load point: which requests, and for open loop when each is sent (computed in advance).

Open-loop send times are offsets from the point's start on one absolute timeline (constant spacing 1/R, or
Poisson gaps drawn from the seed), so a client that is late for one request is not late for the next: nothing
drifts. A point is named by its key `<seed>:<mode>:<load>:<repeat>`; the same key gives the same plan, and
`render_plan` prints it byte for byte the same (what `--dry-run` shows).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from evalkit.load.workload import LoadRequest, Workload, build_request, shared_prefix

MODES = ("concurrency", "rate")
ARRIVALS = ("constant", "poisson")


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

    def send_offsets(self) -> list[float]:
        """Open loop: each request's send time from the point's start (warm-up included); closed loop: empty."""
        if self.spec.mode != "rate":
            return []
        rate = self.spec.load
        rng = random.Random(f"load-arrivals:{self.spec.key(self.seed)}:{self.arrivals}")
        offsets: list[float] = []
        t = 0.0
        measured_start: float | None = None
        i = 0
        while True:
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
            offsets.append(t)
            i += 1
            # Constant spacing from the index, not by adding up gaps, so rounding never accumulates.
            t = i / rate if self.arrivals == "constant" else t + rng.expovariate(rate)
        return offsets


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
        + (f"requests {plan.measured}" if plan.measured is not None else f"duration {plan.duration_s:g} s")
        + (f", arrivals {plan.arrivals}" if s.mode == "rate" else ""),
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
