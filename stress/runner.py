"""Running a stress schedule against a live server: send each planned request at its time, judge it, write it.

Every request's line goes to `requests.jsonl` as it completes, so a Ctrl-C or a time limit loses nothing
measured; the summary is computed afterwards from the files alone. Each completed cycle gets a line in
`cycles.jsonl`, and every line carries the run's `attempt`, so a resumed run skips what is done (stress/resume.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import statistics
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from evalkit.client import auxiliary
from evalkit.client.chat import ChatClient, ChatRequest
from evalkit.client.prompts import LongSpec
from evalkit.client.tokenize import FittedPrompt, TokenCounter, fit_long_prompt, messages_for, probe_counter
from evalkit.clock import Clock, sleep_until
from evalkit.evidence.gpu_memory import GPU_FILE, GpuMemorySampler
from evalkit.progress import Progress
from evalkit.runs.records import RequestRecord
from evalkit.runs.rundir import REQUESTS, RunDir
from evalkit_stress.client_distortion import LoopLagSampler
from evalkit_stress.metric_registry import line_metric
from evalkit_stress.resume import CYCLES_FILE
from evalkit_stress.scenarios import PlannedRequest, Scenario
from evalkit_stress.schedule import Schedule
from evalkit_stress.text_answer import judge_prompt

LAG_FILE = "loop_lag.jsonl"
PROMPTS_FILE = "long_prompts.jsonl"


@dataclass(frozen=True)
class RunOptions:
    """How to send the schedule: time scale, token limits, timeouts and body extras."""

    time_scale: float = 1.0
    short_max_tokens: int = 64
    long_max_tokens: int = 64
    gen_tokens: int = 512
    timeout_s: float = 900.0
    gpu_interval_s: float = 1.0
    progress: bool = True
    log_steps: bool = False  # a line per completed cycle on stderr (when there is no bar: a log, not a terminal)
    # The preflight saw this server end the stream in progress when a new request arrived (llama-cpp-python):
    # a stream cut after HTTP 200 while another request was in flight is then `killed_stream`, even after content.
    kills_streams: bool = False
    # What forces a generation's length on this server (evalkit.client.field_support.length_fields) and how:
    # "ignore_eos", "min_tokens" or "prompt" (nothing forced: the count runs as long as it runs).
    length_body: dict[str, bool | int] = field(default_factory=lambda: {"ignore_eos": True})
    length_mode: str = "ignore_eos"
    # Each count line's `length_forced`, the state length_mode was chosen in (field_support.length_forced_flag of
    # length_state): true where a length is forced, null where ignore_eos was sent and its effect could not be
    # observed with this model, false where nothing forces one.
    length_forced: bool | None = True


class StressRunner:
    """Sends a `Schedule` cycle by cycle; `stop` (Ctrl-C, `--max-minutes`) ends it cleanly at any moment."""

    def __init__(
        self,
        rundir: RunDir,
        client: ChatClient,
        clock: Clock,
        schedule: Schedule,
        opts: RunOptions,
        stop: asyncio.Event,
        gpu_exe: str | None = None,
        attempt: int = 0,
        completed: Mapping[int, int] | None = None,
        fitted: dict[LongSpec, FittedPrompt] | None = None,
        counter: TokenCounter | None = None,
        on_scenario_end: Callable[[str], Awaitable[object]] | None = None,
        after_cycle: Callable[[int], Awaitable[bool]] | None = None,
    ) -> None:
        self.rundir = rundir
        # Called as each scenario's requests have all ended, before the next is sent (the stress command scrapes
        # /metrics there, so a request's histogram window can close before the next scenario's first send).
        self.on_scenario_end = on_scenario_end
        # Called after each completed cycle (`--until-sure`): True ends the run there, decided.
        self.after_cycle = after_cycle
        self.decided = False
        self.client = client
        self.clock = clock
        self.schedule = schedule
        self.opts = opts
        self.stop = stop
        self.nonce = uuid.uuid4().hex[:6]  # request ids stay unique across runs of the same seed
        self.gpu_exe = gpu_exe
        # A resume hands in what earlier attempts did: completed cycles, fitted prompts and the token counter.
        self.attempt = attempt
        self.completed: dict[int, int] = dict(completed or {})
        self.fitted: dict[LongSpec, FittedPrompt] = dict(fitted or {})
        self.counter: TokenCounter | None = counter
        # One writer thread: an fsync in the event loop would delay the next planned send (and it did, by ~50 ms).
        self._io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stress-writer")
        self._inflight: dict[str, float] = {}  # request id -> clock time sent, for requests not yet returned
        self._cancel_at: dict[str, float] = {}  # plan id -> when a cancel timed from an event was due

    @property
    def cycles_done(self) -> int:
        """Cycles completed so far, by this attempt or an earlier one."""
        return len(self.completed)

    async def _write(self, filename: str, line: dict[str, Any]) -> None:
        line = {**line, "attempt": self.attempt}
        await asyncio.get_running_loop().run_in_executor(self._io, self.rundir.append, filename, line)

    # --- token counting -------------------------------------------------------------------------------
    async def _usage_probe(self, messages: list[dict[str, str]]) -> int | None:
        # A tiny request read only for `usage.prompt_tokens`; retried because a faulty server may fail it.
        for _attempt in range(3):
            rec = await self.client.chat(
                ChatRequest(
                    messages=messages,
                    max_tokens=1,
                    request_id=f"{self.nonce}-calibration-{uuid.uuid4().hex[:6]}",
                    timeout_s=self.opts.timeout_s,
                    tags={"scenario": "calibration", "role": "calibration", "cycle": 0, "outcome": "calibration"},
                )
            )
            line = rec.to_json()
            if rec.status != "ok":
                line.update(outcome="error", error_kind="http" if rec.http_status else "broken_stream")
            await self._write(REQUESTS, line)
            if rec.prompt_tokens is not None and rec.usage_source == "server":
                return rec.prompt_tokens
        return None

    async def prepare_tokens(self, session: auxiliary.ClientSession) -> TokenCounter:
        """Find how the server counts tokens (recorded in the manifest)."""
        self.counter = await probe_counter(session, self.client.base_url, self.client.model, self._usage_probe)
        self.rundir.update_manifest(tokenization={**self.counter.describe(), "attempt": self.attempt})
        return self.counter

    async def _fit_cycle(self, session: auxiliary.ClientSession, cycle: int) -> None:
        assert self.counter is not None
        for sc in self.schedule.cycle(cycle):
            for r in sc.requests:
                q = r.question
                if isinstance(q, LongSpec) and q not in self.fitted:
                    fp = await fit_long_prompt(q, self.schedule.long_target(r), self.counter, session)
                    self.fitted[q] = fp
                    await self._write(
                        PROMPTS_FILE,
                        {
                            "plan_id": r.plan_id,
                            "cycle": cycle,
                            "first_word": q.first_word,
                            "code": q.code,
                            "sentences": fp.sentences,
                            "counted_tokens": fp.counted_tokens,
                            "target_tokens": self.schedule.long_target(r),
                            "method": self.counter.method,
                        },
                    )

    # --- sending --------------------------------------------------------------------------------------
    def _request(self, r: PlannedRequest) -> ChatRequest:
        q = r.question
        body: dict[str, bool | int] = {}  # over the client's standing body (the profile's extra_body)
        if isinstance(q, LongSpec):
            text, max_tokens = self.fitted[q].text, self.opts.long_max_tokens
        elif r.prompt == "count":
            # ignore_eos (or min_tokens) makes every generation run its full length; servers that force no length
            # still get checked.
            text, max_tokens = q.text, self.opts.gen_tokens
            body.update(self.opts.length_body)
            if "min_tokens" in body or "min_tokens" in self.client.standing_body:
                body["min_tokens"] = r.max_tokens or max_tokens
        else:
            text, max_tokens = q.text, self.opts.short_max_tokens
        max_tokens = r.max_tokens or max_tokens
        return ChatRequest(
            messages=messages_for(text),
            max_tokens=max_tokens,
            temperature=0.0,
            extra_body=body,
            request_id=f"{self.nonce}-{r.plan_id}",
            timeout_s=self.opts.timeout_s,
        )

    async def _until(self, at: float) -> None:
        await sleep_until(self.clock, at, self.stop)

    async def _cancel_on_event(self, r: PlannedRequest, tl: Timeline, cancel: asyncio.Event) -> None:
        # A cancel timed from another request's event (or this one's first token) sets `cancel` at that time.
        base = await tl.latest(r.cancel_refs or (r.plan_id,), r.cancel_on)
        if base is not None:
            at = base + (r.cancel_after_s or 0.0) / self.opts.time_scale
            self._cancel_at[r.plan_id] = at
            await self._until(at)
        cancel.set()

    async def _one(self, r: PlannedRequest, start: float, tl: Timeline, bar: Progress) -> None:
        if r.after:
            base = await tl.latest(r.after, r.after_on)
            if self.stop.is_set() or base is None:
                tl.skip(r.plan_id)  # what waits for this request must not hang
                return
        else:
            base = start
        planned = base + r.offset_s / self.opts.time_scale
        await self._until(planned)
        if self.stop.is_set():
            tl.skip(r.plan_id)
            return
        cancel_after = None if r.cancel_after_s is None else r.cancel_after_s / self.opts.time_scale
        cancel, watcher = self.stop, None
        if r.cancel_after_s is not None and (r.cancel_refs or r.cancel_on != "sent"):
            cancel_after, cancel = None, asyncio.Event()
            watcher = asyncio.ensure_future(self._cancel_on_event(r, tl, cancel))
            stop_watch = asyncio.ensure_future(self.stop.wait())
            stop_watch.add_done_callback(lambda _: cancel.set())
        request = self._request(r)
        assert request.request_id is not None  # _request names every request
        sent_at = self.clock.now()
        tl.stamp(r.plan_id, "sent", sent_at)
        wire_id = self.client.wire_id(request.request_id)
        self._inflight[wire_id] = sent_at
        try:
            rec = await self.client.chat(
                request,
                cancel_after_s=cancel_after,
                cancel_event=cancel,
                on_first_token=lambda t: tl.stamp(r.plan_id, "first_token", t),
            )
        finally:
            self._inflight.pop(wire_id, None)
            if watcher is not None:
                watcher.cancel()
                stop_watch.cancel()
        # When it ended (its last byte read, or the cancel done), not when this task resumed: requests sent on its
        # end are then planned from the true moment, and their send lateness counts any delay of this loop.
        tl.stamp(r.plan_id, "done", rec.t_done if rec.t_done is not None else self.clock.now())
        tl.skip(r.plan_id)  # a request that ended before its first token sets that event without a stamp
        interrupted = self.stop.is_set() and rec.status == "cancelled"
        # A request that finished before its planned cancel was never cancelled: judged as any other, not
        # "cancelled as planned" (stress/exercised.py).
        verdict = judge_prompt(
            rec, r.prompt, r.expected, planned_cancel=r.cancel_after_s is not None and rec.status != "ok"
        )
        cut = verdict.error_kind in ("broken_stream", "killed_stream")
        killer = self._killed_by(rec) if cut else None
        if killer is not None:
            verdict = dataclasses.replace(verdict, error_kind="killed_stream")
        line = rec.to_json()
        if killer is not None:
            line["killed_by"] = killer
        # Which summary metric the request's timing feeds (the report reads this tag to find raw samples).
        feeds = line_metric(r.scenario, r.role)
        metric = feeds.name if feeds is not None else None
        line.update(
            cycle=r.cycle,
            scenario=r.scenario,
            role=r.role,
            plan_id=r.plan_id,
            expected=r.expected,
            prompt=r.prompt,
            round=r.round_no,
            t_planned=planned,
            cancel_after_s=cancel_after,
            metric=metric,
            outcome="interrupted" if interrupted else verdict.outcome,
            error_kind=None if interrupted else verdict.error_kind,
            extracted=verdict.extracted,
            interrupted=interrupted,
        )
        if isinstance(r.question, LongSpec):
            line["planned_prompt_tokens"] = self.fitted[r.question].counted_tokens
        if feeds is not None and feeds.field != "ttft_s" and feeds.field in line:
            line[feeds.name] = line[feeds.field]  # a rate also under its metric's name
        if r.prompt == "count":
            line.update(length_mode=self.opts.length_mode, length_forced=self.opts.length_forced)
        planned_cancel = self._cancel_at.pop(r.plan_id, None)
        if r.cancel_after_s is not None and not interrupted:
            # A planned cancel is sent only while the request runs: one that ended first was never cancelled.
            line["cancel_sent"] = rec.status == "cancelled"
            if planned_cancel is None and cancel_after is not None:
                planned_cancel = sent_at + cancel_after
            if line["cancel_sent"] and planned_cancel is not None and rec.t_done is not None:
                # How late the client closed the stream against its plan: a busy loop cancels late, and the
                # engine then stops late (the next request's wait grows with it).
                line.update(t_cancel_planned=planned_cancel, cancel_lateness_s=rec.t_done - planned_cancel)
        await self._write(REQUESTS, line)
        bar.update(1)

    def _killed_by(self, rec: RequestRecord) -> str | None:
        """The request that ended this one's stream, on a server the preflight saw killing streams.

        A killer is still in flight when the stream it cut ends: the one that arrived then (the sim), or one that
        was waiting and got its turn (llama-cpp-python lets a waiting request in when the prefill in progress ends,
        and it cuts the running stream). Of those in flight, the earliest sent is the one served next.
        """
        if not (self.opts.kills_streams and rec.http_status == 200 and rec.finish_reason is None):
            return None
        end = rec.t_done if rec.t_done is not None else self.clock.now()
        others = sorted((t, rid) for rid, t in self._inflight.items() if rid != rec.request_id and t <= end)
        return others[0][1] if others else None

    async def run_scenario(self, sc: Scenario, bar: Progress) -> None:
        """Send one scenario's requests at their planned times and wait for all of them."""
        bar.set_postfix_str(sc.name)
        tl = Timeline([r.plan_id for r in sc.requests])
        start = self.clock.now()
        await asyncio.gather(*(self._one(r, start, tl, bar) for r in sc.requests))
        if self.on_scenario_end is not None:
            await self.on_scenario_end(sc.name)

    async def run_rounds(self, rounds: list[Scenario], bar: Progress) -> None:
        """One scenario's rounds back to back (a concurrent file runs several of these at once)."""
        for sc in rounds:
            if self.stop.is_set():
                break
            await self.run_scenario(sc, bar)

    async def run(self) -> None:
        """Every cycle of the schedule until done or `stop` is set."""
        lag = LoopLagSampler(self.clock)
        gpu = None
        if self.gpu_exe:
            gpu = GpuMemorySampler(
                self.gpu_exe,
                self.clock,
                lambda s: self._io.submit(self.rundir.append, GPU_FILE, {**s, "attempt": self.attempt}),
                self.opts.gpu_interval_s,
            )
            gpu.start()
        async with auxiliary.session() as session:
            if self.counter is None:
                await self.prepare_tokens(session)
            lag.start()
            # One count over the cycles left: tqdm's bar on a terminal, a line at least every 25 s in a log.
            left = [c for c in range(1, self.schedule.cycles + 1) if c not in self.completed]
            progress = Progress(
                sum(len(s.requests) for c in left for s in self.schedule.cycle(c)),
                "stress",
                "requests",
                enabled=self.opts.progress,
            )
            try:
                for cycle in range(1, self.schedule.cycles + 1):
                    if cycle in self.completed:
                        continue
                    if self.stop.is_set():
                        break
                    await self._fit_cycle(session, cycle)
                    cycle_start = self.clock.now()  # tokenizing is not part of the measured cycle
                    if gpu is not None:
                        gpu.cycle = cycle
                    scenarios = self.schedule.cycle(cycle)
                    progress.set_description(f"stress cycle {cycle}/{self.schedule.cycles}")
                    with contextlib.nullcontext(progress) as bar:
                        if self.schedule.concurrent:
                            by_name: dict[str, list[Scenario]] = {}
                            for sc in scenarios:
                                by_name.setdefault(sc.name, []).append(sc)
                            await asyncio.gather(*(self.run_rounds(g, bar) for g in by_name.values()))
                        else:
                            await self.run_rounds(scenarios, bar)
                    samples = lag.take(since=cycle_start)
                    await self._write(
                        LAG_FILE,
                        {
                            "cycle": cycle,
                            "n": len(samples),
                            "lag_p95_s": statistics.quantiles(samples, n=20)[-1] if len(samples) >= 2 else None,
                            "lag_max_s": max(samples) if samples else None,
                        },
                    )
                    if not self.stop.is_set():
                        # Written after the cycle's last request line: its presence is what "completed" means.
                        await self._write(
                            CYCLES_FILE,
                            {
                                "cycle": cycle,
                                "requests": sum(len(s.requests) for s in scenarios),
                                "t_start": cycle_start,
                                "t_end": self.clock.now(),
                            },
                        )
                        self.completed[cycle] = self.attempt
                        if self.opts.log_steps:  # no bar (not a terminal): one line per cycle in the log
                            print(
                                f"cycle {cycle}/{self.schedule.cycles} done: "
                                f"{sum(len(s.requests) for s in scenarios)} requests in "
                                f"{self.clock.now() - cycle_start:.1f} s",
                                file=sys.stderr,
                                flush=True,
                            )
                        if self.after_cycle is not None and await self.after_cycle(cycle):
                            self.decided = True
                            break
            finally:
                progress.close()
                await lag.stop()
                if gpu is not None:
                    await gpu.stop()
                self._io.shutdown(wait=True)


class Timeline:
    """When each request of a scenario reached each event (`sent`, `first_token`, `done`), for those timed from it."""

    def __init__(self, plan_ids: list[str]) -> None:
        self.at: dict[tuple[str, str], float] = {}
        self._events = {(p, e): asyncio.Event() for p in plan_ids for e in ("sent", "first_token", "done")}

    def stamp(self, plan_id: str, event: str, t: float) -> None:
        """Record the event's time and wake what waits for it."""
        self.at.setdefault((plan_id, event), t)
        self._events[(plan_id, event)].set()

    def skip(self, plan_id: str) -> None:
        """Wake everything still waiting on this request's events (they will find no time and not be sent)."""
        for e in ("sent", "first_token", "done"):
            self._events[(plan_id, e)].set()

    async def latest(self, plan_ids: tuple[str, ...], event: str) -> float | None:
        """The latest time `event` happened among `plan_ids`; None when one of them never reached it."""
        for p in plan_ids:
            await self._events[(p, event)].wait()
        times = [self.at.get((p, event)) for p in plan_ids]
        return None if any(t is None for t in times) else max(t for t in times if t is not None)
