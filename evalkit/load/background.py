"""A load that keeps a server busy while something else is measured (`evalkit capability --under-load`).

It sends the load command's checkable count prompts (evalkit/load/workload.py) closed loop or open loop until it
is stopped, never measured as a point: each request is one line of its own file as it ends, and `overlap` says how
busy the server was over a window (the mean number of background requests in flight, by Little's law, and the
share of the foreground requests that had at least one background request in flight beside them). Requests still
running at the stop are cancelled and recorded as such.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypedDict

from evalkit.client.chat import ChatClient
from evalkit.clock import Clock
from evalkit.load.arrivals import RateProfile, parse_stages, send_times, stages_profile
from evalkit.load.caps import SendCaps
from evalkit.load.load_spec import LoadSpec
from evalkit.load.workload import LoadRequest, build_request, shared_prefix
from evalkit.runs.judge_response import judge

BACKGROUND = "background.jsonl"


class BackgroundLoad:
    """`async with BackgroundLoad(...)`: the load runs inside the block (after `warmup_s` of it), stops at its end."""

    def __init__(
        self,
        client: ChatClient,
        clock: Clock,
        spec: LoadSpec,
        write: Callable[[dict[str, Any]], None],
        timeout_s: float = 300.0,
    ) -> None:
        self.client, self.clock, self.spec = client, clock, spec
        self.write, self.timeout_s = write, timeout_s
        self.lines: list[dict[str, Any]] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._indices = itertools.count()
        self._caps = SendCaps(spec.max_concurrency, spec.max_prefill)
        self._workload = spec.workload()
        self._prefix = shared_prefix(spec.seed, round(self._workload.prefix_tokens / self._workload.token_scale))
        self._key = f"{spec.seed}:background:{spec.mode}:{spec.load:g}"

    async def __aenter__(self) -> BackgroundLoad:
        if self.spec.mode == "concurrency":
            self._tasks = [asyncio.ensure_future(self._stream()) for _ in range(int(self.spec.load))]
        else:
            self._tasks = [asyncio.ensure_future(self._open_loop())]
        await asyncio.sleep(self.spec.warmup_s)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _one(self, scheduled: float, req: LoadRequest | None = None) -> None:
        i = next(self._indices)
        req = req or build_request(self._workload, self._prefix, self._key, i)
        ticket = await self._caps.enter(self.clock)
        if self._stop.is_set():
            ticket.leave()
            return
        chat = req.chat_request("bg", self.spec.reasoning_room, self.timeout_s)
        try:
            rec = await self.client.chat(chat, cancel_event=self._stop, on_first_token=ticket.first_token)
        finally:
            ticket.leave()
        verdict = judge(rec, "generation", req.expected, planned_cancel=self._stop.is_set())
        line = rec.to_json()
        line.pop("content", None)
        line.pop("reasoning", None)
        line.update(
            {"index": i, "scheduled_send": scheduled, "outcome": verdict.outcome, "error_kind": verdict.error_kind}
        )
        self.lines.append(line)
        self.write(line)

    async def _stream(self) -> None:
        scheduled = self.clock.now()
        while not self._stop.is_set():
            await self._one(scheduled)
            scheduled = self.clock.now()

    def _times(self) -> Iterator[tuple[float, LoadRequest | None]]:
        """(send offset, request or None for the next synthetic one) for ever: stages and traces repeat end to end."""
        s = self.spec
        if s.trace is not None:
            from evalkit.load.trace import TraceOptions, read_trace, trace_plan

            plan = trace_plan(
                read_trace(Path(s.trace)),
                TraceOptions(speedup=s.speedup, block_tokens=s.block_tokens, seed=s.seed),
                s.token_scale,
            )
            offs = plan.send_offsets()
            # One replay after another, the next starting one mean gap after the last send.
            period = offs[-1] + (offs[-1] / (len(offs) - 1) if len(offs) > 1 and offs[-1] > 0 else 1.0)
            for cycle in itertools.count():
                for i, t in enumerate(offs):
                    yield cycle * period + t, plan.request(i)
        elif s.stages:
            stages = parse_stages(s.stages)
            profile = stages_profile(stages)
            for cycle in itertools.count():
                base = cycle * profile.duration_s
                for t, _ in send_times(profile, s.gaps(), f"{self._key}:{cycle}"):
                    yield base + t, None
        else:
            for t, _ in send_times(RateProfile.constant(float(s.rate or 1.0)), s.gaps(), self._key):
                yield t, None

    async def _open_loop(self) -> None:
        start = self.clock.now()
        running: set[asyncio.Task[Any]] = set()
        for off, req in self._times():
            at = start + off
            delay = at - self.clock.now()
            if delay > 0:
                try:
                    await asyncio.wait_for(self._stop.wait(), delay)
                except asyncio.TimeoutError:
                    pass
            if self._stop.is_set():
                break
            task = asyncio.ensure_future(self._one(at, req))
            running.add(task)
            task.add_done_callback(running.discard)
        await asyncio.gather(*running, return_exceptions=True)


class Overlap(TypedDict):
    """How busy the server was beside the foreground requests (`overlap`)."""

    mean_in_flight: float | None
    foreground_overlapped_share: float | None
    window_s: float | None


def overlap(background: list[dict[str, Any]], foreground: list[dict[str, Any]]) -> Overlap:
    """How busy the server was while the foreground requests ran: background requests in flight on average over
    the foreground's window, and the share of foreground requests with a background request in flight beside them."""
    spans = [
        (float(r["t_sent"]), float(r["t_done"]))
        for r in background
        if isinstance(r.get("t_sent"), (int, float)) and isinstance(r.get("t_done"), (int, float))
    ]
    fg = [
        (float(r["t_sent"]), float(r["t_done"]))
        for r in foreground
        if isinstance(r.get("t_sent"), (int, float)) and isinstance(r.get("t_done"), (int, float))
    ]
    if not fg:
        return {"mean_in_flight": None, "foreground_overlapped_share": None, "window_s": None}
    lo, hi = min(a for a, _ in fg), max(b for _, b in fg)
    window = hi - lo
    busy = sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)
    overlapped = sum(1 for a, b in fg if any(x < b and y > a for x, y in spans))
    return {
        "mean_in_flight": busy / window if window > 0 and math.isfinite(window) else None,
        "foreground_overlapped_share": overlapped / len(fg),
        "window_s": window,
    }
