"""Which fault, if any, hits a request: chosen from (seed, request id) so tests can predict and check it.

One draw u in [0, 1) per request: u < fail_rate gives `http_500` (before streaming); the next `disconnect_rate`
gives `disconnect` (the connection is dropped mid-stream); the next `stall_rate` gives `stall` (the stream pauses
`--stall-s`). A second draw places the disconnect or stall inside the output. `wrong_when_batched` is decided later,
by the engine, when the request's prefill ends while the batch holds another request. The event's `fault` names a
fault only once it struck (a client that leaves before its disconnect point sees none).
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.sim.determinism import unit_draw
from evalkit.sim.settings import SimSettings


@dataclass(frozen=True)
class Fault:
    """A fault and where in the output it strikes (a fraction of the output's tokens)."""

    kind: str  # http_500 | disconnect | stall
    at_fraction: float = 0.5

    def at_token(self, n_tokens: int) -> int:
        """The 1-based token index it strikes at: after at least one token, before the last."""
        return max(1, min(n_tokens - 1, int(self.at_fraction * n_tokens))) if n_tokens > 1 else 1


def choose_fault(settings: SimSettings, key: str) -> Fault | None:
    """The fault for the request with this key (its X-Request-Id, or `#<arrival index>`)."""
    u = unit_draw(settings.seed, key, "fault")
    at = 0.2 + 0.6 * unit_draw(settings.seed, key, "fault-at")
    edge = settings.fail_rate
    if u < edge:
        return Fault("http_500")
    edge += settings.disconnect_rate
    if u < edge:
        return Fault("disconnect", at)
    edge += settings.stall_rate
    if u < edge:
        return Fault("stall", at)
    return None
