"""The client checking itself: event-loop lag sampling and send lateness, and whether they distort the run.

A stress metric is a difference of timestamps taken by this process; if the event loop was busy (tokenizing,
writing files, a slow machine) a short request goes out late and its TTFT looks better or worse than it was.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from evalkit.client.lag import ClientLag, client_lag
from evalkit.clock import Clock
from evalkit.eventloop import stop_task
from evalkit.runs.rundir import Line
from evalkit.stats import distribution

if TYPE_CHECKING:
    from evalkit_stress.metrics import Dist, StressMetrics

DISTORTION_SHARE = 0.10  # lateness or lag beyond 10% of the smallest latency metric distorts it
LATENCY_METRICS = ("short_insert_ttft_s", "double_insert_ttft_s", "post_cancel_ttft_s")


class ClientHealth(ClientLag):
    """A stress summary's `client`: send and cancel lateness, loop lag, whether they distort the run (and why), then
    the client's read lag and error budget (`evalkit.client.lag`), in that order."""

    send_lateness_s: Dist
    cancel_lateness_s: Dist
    loop_lag_p95_s: float | None
    loop_lag_max_s: float | None
    loop_lag_judged: bool
    distorted: bool
    distortion_reasons: list[str]


class LoopLagSampler:
    """Sleeps `interval_s` again and again and records how late each wake-up was."""

    def __init__(self, clock: Clock, interval_s: float = 0.02) -> None:
        self.clock = clock
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []  # (when the sleep began, how late it woke)
        self._task: asyncio.Task[None] | None = None

    async def _loop(self) -> None:
        while True:
            t0 = self.clock.now()
            await asyncio.sleep(self.interval_s)
            self.samples.append((t0, max(0.0, self.clock.now() - t0 - self.interval_s)))

    def start(self) -> None:
        """Begin sampling in the running loop."""
        self._task = asyncio.ensure_future(self._loop())

    def take(self, since: float | None = None) -> list[float]:
        """The lags of sleeps that began at or after `since` (all when None), forgetting every sample so far."""
        out, self.samples = self.samples, []
        return [lag for t0, lag in out if since is None or t0 >= since]

    async def stop(self) -> None:
        """Stop sampling."""
        await stop_task(self._task)


def client_health(lines: list[Line], lag_rows: list[Line], metrics: StressMetrics) -> ClientHealth:
    """Send and cancel lateness and loop lag distributions, `distorted` with its reasons, and the client's read lag
    and error budget (`evalkit.client.lag`).

    What a busy client can bend, and how each is judged against 10% of the smallest latency metric's p50:
    - a send or a cancel that goes out late: measured directly (`send_lateness_s` p95, `cancel_lateness_s` max;
      requests sent on another's end are planned from that end's own stamp, so their lateness counts the delay);
    - a first token whose bytes queued unread behind a busy loop and took a later token's stamp: bounded by the
      client's error budget (`error_budget_s`, p99 of each first token's stamp bound) where the client records
      it. Then the event loop's lag is reported but is no reason of its own: a lag during which nothing was due
      and no first token arrived bends no figure.
    Without those bounds (no kernel receive stamps, or a run from a client that did not record them) nothing tells
    what a long lag delayed, so the lag itself is judged."""
    lateness = [r["t_sent"] - r["t_planned"] for r in lines if r.get("t_planned") is not None and r.get("t_sent")]
    cancel_late = [r["cancel_lateness_s"] for r in lines if isinstance(r.get("cancel_lateness_s"), (int, float))]
    lag_p95 = [row["lag_p95_s"] for row in lag_rows if row.get("lag_p95_s") is not None]
    lag_max = [row["lag_max_s"] for row in lag_rows if row.get("lag_max_s") is not None]
    late = distribution(lateness)
    cancels = distribution(cancel_late)
    read = client_lag(lines)
    budget = read.get("error_budget_s")
    smallest = min((p for m in LATENCY_METRICS if (p := (metrics.get(m) or {}).get("p50"))), default=None)
    reasons = []
    if smallest is not None:
        limit = DISTORTION_SHARE * smallest
        against = f"exceeds 10% of the smallest latency metric's p50 ({smallest * 1000:.1f} ms)"
        if late["p95"] is not None and late["p95"] > limit:
            reasons.append(f"send lateness p95 {late['p95'] * 1000:.1f} ms {against}")
        if cancels["max"] is not None and cancels["max"] > limit:
            reasons.append(f"a cancel went out {cancels['max'] * 1000:.1f} ms late, which {against}")
        if budget is not None:
            if budget > limit:
                reasons.append(f"first-token stamps may lie {budget * 1000:.1f} ms late (p99), which {against}")
        elif lag_max and max(lag_max) > limit:
            reasons.append(f"event-loop lag max {max(lag_max) * 1000:.1f} ms {against}")
    return {
        "send_lateness_s": late,
        "cancel_lateness_s": cancels,
        "loop_lag_p95_s": max(lag_p95) if lag_p95 else None,
        "loop_lag_max_s": max(lag_max) if lag_max else None,
        "loop_lag_judged": budget is None,
        "distorted": bool(reasons),
        "distortion_reasons": reasons,
        **read,
    }
