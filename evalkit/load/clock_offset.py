"""How far another host's clock is from the coordinator's, from round trips (NTP's rule), and request lines moved
onto the coordinator's clock.

A probe notes the coordinator's clock when it asks (`sent`), the host's clock when it answers (`remote`) and the
coordinator's clock when the answer is back (`back`). The host read its clock at some coordinator time inside
[sent, back], so its offset (host minus coordinator) lies in [remote - back, remote - sent]: the midpoint, give or
take half the round trip. Every probe's interval holds the true offset while the offset stands still, so their
intersection holds it too and is as narrow as the best probes allow (the shortest round trip alone, NTP's
min-delay sample, is never narrower). When the intervals do not meet (a clock stepped or drifted between probes),
the estimate falls back to the probes of the shortest round trip before and after, and its uncertainty spans both.

Durations measured on one host (TTFT, inter-token gaps, e2e) are differences of that host's own stamps: the offset
cannot touch them. What it moves is each absolute stamp of a merged timeline (when a request was sent, when its
first token came), by at most the uncertainty.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict, cast

from evalkit.load.records import LoadLine, as_json

# The absolute stamps of a request line (evalkit.runs.schemas.RequestLine plus load's own `scheduled_send`);
# everything else in a line is a duration, a count or a label.
ABSOLUTE_STAMPS = (
    "t_sent",
    "t_first_byte",
    "t_first_token",
    "t_first_answer_token",
    "t_done",
    "t_last_token",
    "scheduled_send",
)


@dataclass(frozen=True)
class ClockProbe:
    """One round trip: the coordinator's clock when it asked and when the answer was back, the host's in between."""

    sent: float
    remote: float
    back: float

    @property
    def round_trip_s(self) -> float:
        return self.back - self.sent

    @property
    def interval(self) -> tuple[float, float]:
        """Where the offset (host minus coordinator) must lie, by this probe alone."""
        return self.remote - self.back, self.remote - self.sent


class ClockJson(TypedDict):
    """A host's clock estimate as `client_hosts.jsonl` records it (`ClockOffset.to_json`)."""

    offset_s: float
    uncertainty_s: float
    round_trip_s: float
    probes: int
    consistent: bool


@dataclass(frozen=True)
class ClockOffset:
    """A host's clock minus the coordinator's: `offset_s`, true within ± `uncertainty_s`; `round_trip_s` the
    shortest round trip seen, `probes` how many were taken; `consistent` False when the probes' intervals did not
    meet (the clock moved while it was probed)."""

    offset_s: float
    uncertainty_s: float
    round_trip_s: float
    probes: int
    consistent: bool = True

    def to_host(self, t: float) -> float:
        """A coordinator time on the host's clock."""
        return t + self.offset_s

    def to_coordinator(self, t: float) -> float:
        """A host time on the coordinator's clock."""
        return t - self.offset_s

    def to_json(self) -> ClockJson:
        """The estimate as client_hosts.jsonl records it."""
        return {
            "offset_s": self.offset_s,
            "uncertainty_s": self.uncertainty_s,
            "round_trip_s": self.round_trip_s,
            "probes": self.probes,
            "consistent": self.consistent,
        }


def estimate_offset(probes: Sequence[ClockProbe]) -> ClockOffset:
    """The offset the probes allow: the intersection of their intervals (its midpoint, give or take half its
    width), or, when they do not meet, the span of the best probe of each half (in the order taken)."""
    if not probes:
        raise ValueError("no clock probes")
    lo = max(p.interval[0] for p in probes)
    hi = min(p.interval[1] for p in probes)
    best = min(p.round_trip_s for p in probes)
    if lo <= hi:
        return ClockOffset((lo + hi) / 2, (hi - lo) / 2, best, len(probes))
    half = max(1, len(probes) // 2)
    ends = [min(part, key=lambda p: p.round_trip_s) for part in (probes[:half], probes[half:]) if part]
    lo = min(p.interval[0] for p in ends)
    hi = max(p.interval[1] for p in ends)
    return ClockOffset((lo + hi) / 2, (hi - lo) / 2, best, len(probes), consistent=False)


def on_coordinator_clock(line: LoadLine, offset: ClockOffset) -> LoadLine:
    """A request line a host stamped on its own clock, with every absolute stamp (and each chunk time) moved onto
    the coordinator's; durations and labels unchanged."""
    out = as_json(line.copy())
    for key in ABSOLUTE_STAMPS:
        value = out.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = offset.to_coordinator(value)
    chunks = out.get("chunk_times")
    if isinstance(chunks, list):
        out["chunk_times"] = [offset.to_coordinator(t) for t in chunks]
    return cast(LoadLine, out)
