"""Open-loop send times: a rate profile over time (one rate, a linear ramp-up, or stages) and a gap process.

The gap process runs on "operational time": its gaps have mean 1 (constant 1; Poisson exponential; gamma with
shape k = `burstiness` and scale 1/k, as vLLM's `--burstiness`: the gaps' coefficient of variation is
1/sqrt(burstiness), so below 1 is burstier than Poisson and above 1 more even). Bursts send `burst_size` requests
at one instant with gaps `burst_size` times longer, so the mean rate holds. The rate profile maps operational time
u to clock time t by inverting Λ(t) = ∫ r(s) ds, piecewise linear in r, so a ramp or a stage change bends the
timeline without any per-request drift. Everything is drawn from one seeded `random.Random`.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from evalkit.errors import UsageError
from evalkit.load.records import StageJson

ARRIVALS = ("constant", "poisson", "gamma")


@dataclass(frozen=True)
class Segment:
    """A stretch of the rate profile: the rate moves linearly from `start_rate` to `end_rate` over `duration_s`."""

    start_rate: float
    end_rate: float
    duration_s: float  # math.inf: the last, open-ended segment (constant rate)

    @property
    def mass(self) -> float:
        """Expected requests in the segment (Λ over it)."""
        return (self.start_rate + self.end_rate) / 2 * self.duration_s

    def invert(self, u: float) -> float:
        """The time into the segment where Λ reaches `u` (0 <= u <= mass)."""
        r0, r1, d = self.start_rate, self.end_rate, self.duration_s
        if u <= 0:
            return 0.0
        if math.isinf(d) or r1 == r0:
            return u / r0
        a = (r1 - r0) / d  # Λ(t) = r0 t + a t^2 / 2
        # The root of a t^2/2 + r0 t - u = 0 in the form that stays exact when r0 is 0 or a is tiny.
        return 2 * u / (r0 + math.sqrt(r0 * r0 + 2 * a * u))


@dataclass(frozen=True)
class RateProfile:
    """The rate over the point's time: segments one after another; `stages` marks which segment is which stage."""

    segments: tuple[Segment, ...]
    stage_of_segment: tuple[int, ...] = ()

    @classmethod
    def constant(cls, rate: float, ramp_up_s: float = 0.0) -> RateProfile:
        """`rate` for ever, reached linearly from 0 over `ramp_up_s` seconds."""
        segs = ([Segment(0.0, rate, ramp_up_s)] if ramp_up_s > 0 else []) + [Segment(rate, rate, math.inf)]
        return cls(tuple(segs), tuple(range(len(segs))))

    @property
    def finite(self) -> bool:
        """True when the profile ends (stages): no sends after its last segment."""
        return not math.isinf(self.segments[-1].duration_s)

    @property
    def duration_s(self) -> float:
        """The profile's length (inf for an open-ended one)."""
        return sum(s.duration_s for s in self.segments)

    def at(self, u: float) -> tuple[float, int] | None:
        """(clock time, segment index) where the cumulative intensity reaches `u`; None past the end."""
        t0 = 0.0
        for i, s in enumerate(self.segments):
            if u < s.mass or math.isinf(s.duration_s):
                return t0 + s.invert(u), i
            u -= s.mass
            t0 += s.duration_s
        return None

    def stage(self, segment: int) -> int:
        """The stage a segment belongs to."""
        return self.stage_of_segment[segment] if self.stage_of_segment else segment


@dataclass(frozen=True)
class GapProcess:
    """Gaps in operational time (mean 1 per request): constant, Poisson or gamma, optionally in bursts."""

    arrivals: str = "constant"
    burstiness: float = 1.0
    burst_size: int = 1

    def __post_init__(self) -> None:
        if self.arrivals not in ARRIVALS:
            raise UsageError(f"arrivals must be one of {', '.join(ARRIVALS)}, not {self.arrivals!r}")
        if not (self.burstiness > 0 and math.isfinite(self.burstiness)):
            raise UsageError("--burstiness must be a positive number")
        if self.burst_size < 1:
            raise UsageError("--burst-size must be at least 1")

    @property
    def cv(self) -> float:
        """The coefficient of variation of one event's gap (bursts aside)."""
        return {"constant": 0.0, "poisson": 1.0}.get(self.arrivals, 1 / math.sqrt(self.burstiness))

    def events(self, rng: random.Random) -> Iterator[float]:
        """Cumulative operational times of the requests, from 0 (each burst's requests share one time)."""
        b = self.burst_size
        u, i = 0.0, 0
        while True:
            for _ in range(b):
                yield u
            i += 1
            if self.arrivals == "constant":
                u = float(i * b)  # from the index, so rounding never accumulates
            elif self.arrivals == "poisson":
                u += b * rng.expovariate(1.0)
            else:
                k = self.burstiness
                u += b * rng.gammavariate(k, 1.0 / k)


def send_times(profile: RateProfile, gaps: GapProcess, seed_key: str) -> Iterator[tuple[float, int]]:
    """(send offset in seconds, stage index) of every request, in order; ends with a finite profile."""
    rng = random.Random(f"load-arrivals:{seed_key}:{gaps.arrivals}:{gaps.burstiness:g}:{gaps.burst_size}")
    for u in gaps.events(rng):
        hit = profile.at(u)
        if hit is None:
            return
        t, seg = hit
        yield t, profile.stage(seg)


@dataclass(frozen=True)
class Stage:
    """One stage of a multi-stage profile: a rate (or a linear move between two) held for `duration_s`."""

    rate: float
    duration_s: float
    start_rate: float | None = None  # a ramp: from this rate to `rate`
    label: str = field(default="")

    def to_json(self) -> StageJson:
        """The stage as the manifest and summary name it."""
        return {"rate": self.rate, "start_rate": self.start_rate, "duration_s": self.duration_s, "label": self.label}


_STAGE = re.compile(r"\s*(?:([0-9.]+)\s*-\s*)?([0-9.]+)\s*(?:/s)?\s*:\s*([0-9.]+)\s*s?\s*")


def parse_stages(text: str) -> list[Stage]:
    """`RATE:SECONDS[,...]`, a ramp as `FROM-TO:SECONDS`: `2:30,2-8:10,8:60` (requests/s and seconds)."""
    stages = []
    for i, part in enumerate(text.split(",")):
        m = _STAGE.fullmatch(part)
        if not m:
            raise UsageError(f"--stages: {part.strip()!r} is not RATE:SECONDS or FROM-TO:SECONDS")
        try:
            start = float(m.group(1)) if m.group(1) else None
            rate, dur = float(m.group(2)), float(m.group(3))
        except ValueError:
            raise UsageError(f"--stages: {part.strip()!r} holds a number that is not one") from None
        if dur <= 0 or rate < 0 or (start is not None and start < 0) or (rate == 0 and not start):
            raise UsageError(f"--stages: {part.strip()!r} needs a positive duration and a rate above 0")
        stages.append(Stage(rate, dur, start, f"stage {i}"))
    return stages


def stages_profile(stages: list[Stage]) -> RateProfile:
    """The finite profile of a list of stages."""
    segs = [Segment(s.rate if s.start_rate is None else s.start_rate, s.rate, s.duration_s) for s in stages]
    return RateProfile(tuple(segs), tuple(range(len(segs))))
