"""Running one load point against a server: closed loop (N streams) or open loop (sends on a planned timeline).

Closed loop: each stream sends its next request as soon as its previous answer is in, so the time it is
"scheduled" is the previous answer's arrival and any delay after it is the client's lateness. Once the last
measured request is sent, the streams keep sending cool-down requests so the measured ones finish under the same
load; those are cancelled when the last measured one ends, and, like the warm-up, never counted. Open loop: every
send time is fixed before the point starts, on one absolute timeline. Every answer is checked. Caps on requests in
flight or in prefill (evalkit/load/caps.py) hold a send until a slot frees: `cap_wait_s` is that wait, and
`send_lateness_s` counts from the slot's release. A precision stop (`--target-moe`) ends the measured phase early:
no more measured sends once the watched percentile is sure enough; those in flight finish and count.
"""

from __future__ import annotations

import asyncio
import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TypedDict, cast

from evalkit.client.chat import ChatClient
from evalkit.clock import Clock, sleep_until
from evalkit.load.caps import SendCaps
from evalkit.load.precision import warm
from evalkit.load.records import LoadLine, as_json
from evalkit.load.schedule import PointPlan
from evalkit.load.workload import LoadRequest
from evalkit.progress import Progress
from evalkit.runs.judge_response import judge
from evalkit.runs.rundir import REQUESTS, RunDir

# Open loop starts this long after planning, so the first sends are not already late.
_LEAD_S = 0.05


class _ClosedLoopState(TypedDict):
    """What a closed loop's streams share: measured requests out now, the measured phase's end, still issuing."""

    in_flight: int
    deadline: float | None
    issuing: bool


@dataclass
class PointRun:
    """One repeat of one load point as it runs: its id, plan, and the lines written so far."""

    point_id: int
    plan: PointPlan
    lines: list[LoadLine] = field(default_factory=list)
    caps: SendCaps = field(init=False)
    stopped_early: bool = False  # the precision stop ended the measured phase before its maximum
    _checked: int = -1  # measured lines when the precision stop was last checked

    def __post_init__(self) -> None:
        self.caps = SendCaps(self.plan.max_concurrency, self.plan.max_prefill)

    def precise_enough(self) -> bool:
        """True once the plan's precision stop is reached by the measured lines so far."""
        stop = self.plan.precision
        if stop is None or self.stopped_early:
            return self.stopped_early
        measured = self.measured()
        if len(measured) != self._checked:  # the interval moves only when an answer comes in
            self._checked = len(measured)
            self.stopped_early = stop.reached(measured)
        return self.stopped_early

    def measured(self) -> list[LoadLine]:
        """The lines that count."""
        return [r for r in self.lines if r.get("phase") == "measured"]


@dataclass(frozen=True)
class PlannedSend:
    """One open-loop send: the request's index, its phase, its absolute send time and its stage (None: no stages)."""

    index: int
    phase: str
    at: float
    stage: int | None = None


def open_loop_sends(plan: PointPlan, start: float) -> list[PlannedSend]:
    """Every send of an open-loop point starting at `start` (send_offsets, not send_schedule: a plan may fix its own
    times, as evalkit/load/trace.py's TracePlan does)."""
    offsets = plan.send_offsets()
    stages: list[int | None] = list(plan.send_stages()) if plan.stages else [None] * len(offsets)
    return [PlannedSend(i, plan.phase(i), start + off, stage) for i, (off, stage) in enumerate(zip(offsets, stages))]


class PointProgress:
    """A point's progress (evalkit.progress: a bar on a terminal, a line at least every 25 s in a log): its requests
    answered out of those planned (a duration-bound closed loop: answered so far, against its duration)."""

    def __init__(self, point: PointRun, desc: str) -> None:
        plan = point.plan
        if plan.spec.mode == "rate":
            total: int | None = len(plan.send_offsets())
        else:
            total = plan.warmup + plan.measured if plan.measured is not None else None
        self.point = point
        self.bar = Progress(total, desc, "requests")
        if total is None and plan.duration_s:
            self.bar.set_postfix_str(f"measures for {plan.duration_s:g} s after {plan.warmup} warm-up requests")
        self.task: asyncio.Task[None] | None = None

    async def _follow(self) -> None:
        while True:
            self.bar.update(len(self.point.lines) - self.bar.done)
            await asyncio.sleep(0.5)

    def __enter__(self) -> PointProgress:
        self.task = asyncio.get_running_loop().create_task(self._follow())
        return self

    def __exit__(self, *exc: object) -> None:
        if self.task is not None:
            self.task.cancel()
        self.bar.update(len(self.point.lines) - self.bar.done)
        self.bar.close()


class LoadRunner:
    """Sends the requests of load points and writes one line per request as it completes."""

    def __init__(self, rundir: RunDir | None, client: ChatClient, clock: Clock, timeout_s: float) -> None:
        self.rundir = rundir  # None: the lines are only kept on the point (a client host's, sent back whole)
        self.client = client
        self.clock = clock
        self.timeout_s = timeout_s
        # fsync takes milliseconds; done on the event loop it would make the next sends late.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="load-writer")

    def close(self) -> None:
        """Wait for every line to be on disk."""
        self._writer.shutdown(wait=True)

    async def run_point(self, point: PointRun) -> PointRun:
        """Run one repeat of one point to its end; returns it with its lines."""
        if point.plan.precision is not None:
            warm()  # the stop's interval needs scipy: loaded before the clock starts, not between two sends
        if point.plan.spec.mode == "rate":
            await self._open_loop(point)
        else:
            await self._closed_loop(point)
        await asyncio.get_running_loop().run_in_executor(self._writer, lambda: None)  # lines flushed
        return point

    async def _send(
        self,
        point: PointRun,
        req: LoadRequest,
        phase: str,
        scheduled: float,
        cancel: asyncio.Event | None = None,
        stage: int | None = None,
    ) -> LoadLine:
        spec = point.plan.spec
        ticket = await point.caps.enter(self.clock)
        released = ticket.released_at
        chat = req.chat_request("load", point.plan.reasoning_room, self.timeout_s)
        try:
            rec = await self.client.chat(chat, cancel_event=cancel, on_first_token=ticket.first_token)
        finally:
            ticket.leave()
        verdict = judge(rec, "generation", req.expected, planned_cancel=phase == "cooldown")
        raw = rec.to_json(with_chunk_times=True)
        raw.pop("content", None)
        raw.pop("reasoning", None)
        line = cast(LoadLine, raw)  # the record's fields as requests.jsonl holds them, then the point's
        line.update(
            {
                "point": point.point_id,
                "mode": spec.mode,
                "load": spec.load,
                "repeat": spec.repeat,
                "index": req.index,
                "phase": phase,
                "scheduled_send": scheduled,
                "send_lateness_s": rec.t_sent - max(scheduled, released or scheduled),
                **({"cap_wait_s": max(0.0, released - scheduled)} if released is not None else {}),
                **({"stage": stage} if stage is not None else {}),
                "e2e_s": rec.t_done - rec.t_sent if rec.t_done is not None else None,
                "planned_prompt_tokens": req.prompt_tokens,
                "planned_output_tokens": req.output_tokens,
                "count_to": req.count_to,
                "outcome": verdict.outcome,
                "error_kind": verdict.error_kind,
                "extracted": verdict.extracted,
            }
        )
        point.lines.append(line)
        if self.rundir is not None:
            self._writer.submit(self.rundir.append, REQUESTS, as_json(line))
        return line

    async def _open_loop(self, point: PointRun) -> None:
        plan = point.plan
        reqs = [plan.request(i) for i in range(len(plan.send_offsets()))]  # built before the clock starts
        sends = open_loop_sends(plan, self.clock.now() + _LEAD_S)
        await self.send_planned(point, list(zip(reqs, sends)))

    async def send_planned(self, point: PointRun, planned: list[tuple[LoadRequest, PlannedSend]]) -> None:
        """Send each request at its planned time on this runner's clock (open loop); a precision stop ends the
        measured sends early. Returns once every answer is in."""
        tasks = []
        for req, send in planned:
            await sleep_until(self.clock, send.at)
            if send.phase == "measured" and point.precise_enough():
                break
            tasks.append(asyncio.ensure_future(self._send(point, req, send.phase, send.at, stage=send.stage)))
        await asyncio.gather(*tasks)

    async def _closed_loop(self, point: PointRun) -> None:
        plan = point.plan
        streams = int(plan.spec.load)
        indices = itertools.count()
        finished = asyncio.Event()
        state: _ClosedLoopState = {"in_flight": 0, "deadline": None, "issuing": True}
        start = self.clock.now()

        def phase_of(i: int) -> str:
            if i < plan.warmup:
                return "warmup"
            if plan.measured is not None:
                phase = plan.phase(i)
                return "cooldown" if phase == "measured" and point.precise_enough() else phase
            deadline = state["deadline"]
            if deadline is None:
                deadline = state["deadline"] = self.clock.now() + (plan.duration_s or 0.0)
            return "measured" if self.clock.now() < deadline else "cooldown"

        def check_finished() -> None:
            if not state["issuing"] and state["in_flight"] == 0:
                finished.set()

        async def stream() -> None:
            scheduled = start
            while not finished.is_set():
                i = next(indices)
                phase = phase_of(i)
                if phase == "cooldown":
                    state["issuing"] = False
                    check_finished()
                    if finished.is_set():
                        return
                else:
                    state["in_flight"] += phase == "measured"
                line = await self._send(
                    point, plan.request(i), phase, scheduled, cancel=finished if phase == "cooldown" else None
                )
                if phase == "measured":
                    state["in_flight"] -= 1
                    check_finished()
                scheduled = line["t_done"] or self.clock.now()

        await asyncio.gather(*(stream() for _ in range(streams)))
