"""The simulated inference engine: one asyncio loop stepping through time like a continuous-batching server.

Model (every duration is divided by `--time-scale`):
- A request waits in a FIFO queue until a slot is free (`--max-batch`; `--clamp-batch` makes it 1).
- Prefill runs at `--prefill-rate` tok/s in chunks of `--prefill-chunk` tokens. When a request's prefill ends the
  engine sends the role-only first chunk and the request joins the decode batch.
- A decode step gives every decoding request one token. Its length is b / R(b) for b requests, where the combined
  rate R goes linearly from `--decode-rate` (b = 1) to `--batch-decode-rate` (b = max batch).
- The engine looks at the queue only between steps. A prompt longer than `--long-threshold` tokens is long:
  with `--no-yield` its prefill runs every chunk back to back (head-of-line blocking: nothing else is admitted,
  nobody decodes); with `--yield` it pauses after each chunk, admits queued short requests (the paused long
  request does not hold a slot), prefills them, and runs `--yield-decode-steps` decode steps before the next chunk,
  so short requests get a first token within about one chunk and then decode slowly.
- A client that closes its connection is noticed between chunks and steps (the transport is closing) and when a
  write fails. `--cancel-aborts` stops a prefill at the next chunk boundary; `--no-cancel-aborts` lets it run to
  the end, still occupying the engine. Either way the event says `cancelled: true`.
- Engine time is kept against absolute deadlines, so sleep overshoot never accumulates into rate drift. An idle
  engine's timeline restarts at the arrival of the request that wakes it, so the sim's own work on a request
  (reading and counting a 54K-token body takes tens of milliseconds) is not added to the modelled latency, which
  matters at high `--time-scale`. `prefill_start` and `prefill_done` are stamped on that timeline.
- Real servers' behaviours, each behind a flag: `--cancel-batch-tokens B` honours a cancel only at the end of a
  prefill batch of B tokens (llama.cpp's `-b`); `--housekeeping-s-per-token S` makes the engine store a finished
  request's state for S x its context tokens before anything else (llama.cpp's prompt-cache store);
  `--kill-on-new-request` ends the stream in progress when a request arrives (llama-cpp-python). When the engine
  stopped working on a request is stamped as `engine_stopped`, the store as `housekeeping_start`/`_end`.
- `--step-tokens B` (llama.cpp's shared steps, `-b B` with several slots): every admitted request is launched into a
  slot at once (`launched`, its `processing task` line), and each step takes up to B tokens: one per decoding
  request, then the prompts in launch order. A request launched behind a long prompt that fills every step waits in
  its slot until a step has room (`prefill_start`); requests whose prompts end in one step get their first tokens
  together. A cancel is noticed between steps (at a `--cancel-batch-tokens` boundary when one is set).
- `--idle-slot-save-s-per-token S` (llama.cpp's `--cache-idle-slots`): right after a launch the engine stores each
  idle slot's state not yet stored, S x its tokens, doing nothing else and writing no line (`--trace-log` writes
  the trace-level `saving idle slot to prompt cache`); stamped on the launched request as `idle_save_start`/`_end`.
  Slots are then picked least recently used, as llama.cpp does.
- `--prefix-cache-blocks N` (evalkit/sim/prefix_cache.py): when the engine starts a request it looks its prompt's
  blocks up; the hit tokens count as prefilled already, so only the rest is prefilled (`cached_tokens` in the
  request's event). Its prompt's blocks are stored when its prefill ends, prompt and answer when the answer ends.
- `--step-gauges` (vLLM): the running/waiting counts /metrics shows are taken as each step ends (a prefill without
  yield is one step, as vLLM's prefill without chunking is), so a scrape during a long step reads the state before it.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalkit.client.tokens import tokenize
from evalkit.clock import Clock
from evalkit.sim.faults import Fault
from evalkit.sim.metrics import SpecDecoder
from evalkit.sim.output import Output
from evalkit.sim.prefix_cache import PrefixCache, block_hashes
from evalkit.sim.serverlog import SimLog
from evalkit.sim.settings import SimSettings
from evalkit.sim.trace import RequestTrace

# Messages from the engine to a request's handler.
PREFILLED, TOKEN, END, CANCELLED, KILLED = "prefilled", "token", "end", "cancelled", "killed"
# Below this the engine does not sleep (the event loop cannot sleep that precisely) but still yields now and then.
_MIN_SLEEP = 0.0005
_YIELD_EVERY = 0.002
# The engine never runs more than this far behind its schedule (a busy event loop would otherwise make it burst);
# it is also how far back an idle engine's timeline may restart at a request's arrival.
_MAX_LAG = 0.25


@dataclass(eq=False)
class Job:
    """A request inside the engine: its prompt size, how to write its output, and where it stands."""

    trace: RequestTrace
    arrived_perf: float  # time.perf_counter() when the request arrived
    prompt_tokens: int
    long: bool
    make_output: Callable[[bool], Output]  # argument: whether the batch holds another request
    client_gone: Callable[[], bool]
    fault: Fault | None = None
    outbox: asyncio.Queue[tuple[Any, ...]] = field(default_factory=asyncio.Queue)
    prefilled: int = 0
    output: Output | None = None
    emitted: int = 0
    state: str = "queued"  # queued | prefill | decode | done
    stall_until: float = 0.0
    stalled: bool = False
    write_failed: bool = False
    cache_tokens: list[str] | None = None  # the prompt's token sequence, when the prefix cache is on
    pace: float = 1.0  # its decode step time over the engine's (--decode-jitter), drawn as it starts to decode

    def gone(self) -> bool:
        """The client has left (connection closed or a write failed)."""
        return self.write_failed or self.client_gone()


class Engine:
    """Runs jobs through prefill and decode on one simulated accelerator."""

    def __init__(self, settings: SimSettings, clock: Clock, log: SimLog | None = None) -> None:
        self.s = settings
        self.clock = clock
        self.log = log or SimLog(None)
        self.spec = SpecDecoder(settings.spec_accept, settings.seed)
        self._pace = random.Random(f"decode-jitter:{settings.seed}")
        self.prefix_cache = (
            PrefixCache(settings.prefix_cache_blocks, settings.prefix_block_tokens)
            if settings.prefix_cache_blocks > 0
            else None
        )
        self._housekeeping: list[tuple[Job, int]] = []  # finished requests whose state is still to be stored
        self._slot_state: dict[int, list[Any]] = {}  # slot -> [tokens it holds, stored yet, when released]
        self._idle_saves: list[tuple[Job, int, int]] = []  # (launched job, idle slot, its tokens) still to store
        self.queue: deque[Job] = deque()
        self.active: list[Job] = []  # slot holders: prefilling or decoding
        self.long_job: Job | None = None  # yield mode: the paused long prefill (holds no slot)
        self._steps_since_chunk = 0
        self._wake = asyncio.Event()
        self._t = time.perf_counter()
        self._last_yield = self._t
        self._epoch_offset = clock.now() - time.perf_counter()
        self._task: asyncio.Task[None] | None = None
        self._gauges = (0, 0)  # (running, waiting) as the last step ended (--step-gauges)

    # -- public --------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the engine loop on the running event loop."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop the engine loop."""
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def counts(self) -> tuple[int, int]:
        """Requests running (slot holders and the paused long prefill) and waiting in the queue, now."""
        return len(self.active) + (1 if self.long_job is not None else 0), len(self.queue)

    def gauges(self) -> tuple[int, int]:
        """The (running, waiting) /metrics shows: now, or as the last engine step ended with --step-gauges."""
        return self._gauges if self.s.step_gauges else self.counts()

    def submit(self, job: Job) -> None:
        """Queue a job; the engine picks it up at its next step boundary."""
        if self.s.kill_on_new_request:
            # Only streams a client still reads can be killed: one its client already closed was cancelled.
            for other in self.active + ([self.long_job] if self.long_job else []):
                if not other.gone():
                    self._kill(other)
        self.queue.append(job)
        self._wake.set()

    def clear(self) -> None:
        """Forget queued and running jobs (used by /sim/reset; their handlers are told they were cancelled)."""
        for job in list(self.queue) + self.active + ([self.long_job] if self.long_job else []):
            self._cancel(job)
        self.queue.clear()
        self.active.clear()
        self.long_job = None
        self._housekeeping.clear()
        self._idle_saves.clear()

    # -- time ----------------------------------------------------------------------------------------------
    async def _advance(self, model_seconds: float) -> None:
        now = time.perf_counter()
        self._t = max(self._t, now - _MAX_LAG) + model_seconds / self.s.time_scale
        delay = self._t - now
        if delay > _MIN_SLEEP:
            await asyncio.sleep(delay)
            self._last_yield = time.perf_counter()
        elif now - self._last_yield > _YIELD_EVERY:
            await asyncio.sleep(0)
            self._last_yield = time.perf_counter()

    async def _idle(self, timeout: float | None) -> None:
        free_from = min(self._t, time.perf_counter())
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        now = time.perf_counter()
        first_arrival = min((j.arrived_perf for j in self.queue), default=now)
        self._t = max(free_from, min(now, first_arrival))

    def _timeline_epoch(self) -> float:
        return self._t + self._epoch_offset

    # -- bookkeeping ---------------------------------------------------------------------------------------
    def _cancel(self, job: Job) -> None:
        job.state = "done"
        # Stamped on the engine's timeline, like prefill_start, so the next request never seems to start early.
        at = min(self.clock.now(), max(job.trace.arrived, self._timeline_epoch()))
        if job.trace.end("cancelled", at):
            job.trace.completion_tokens = job.emitted
        if job.trace.prefill_start is not None or job.trace.launched is not None:
            self.log.write(f"srv          stop: cancel task, id_task = {job.trace.arrival_index}")
            self._released(job, at)
        elif job.trace.engine_stopped is None:
            # Dropped from the queue before the engine started on it: honoured at once, with nothing done.
            job.trace.engine_stopped, job.trace.stopped_at_tokens = at, 0
        job.outbox.put_nowait((CANCELLED,))

    def _kill(self, job: Job) -> None:
        # llama-cpp-python: the stream in progress just ends; the request is dropped where it stands.
        self._remove(job)
        job.state = "done"
        at = min(self.clock.now(), max(job.trace.arrived, self._timeline_epoch()))
        job.trace.fault = job.trace.fault or "killed_stream"
        if job.trace.end("killed", at):
            job.trace.completion_tokens = job.emitted
        job.trace.engine_stopped, job.trace.stopped_at_tokens = at, job.prefilled
        job.outbox.put_nowait((KILLED,))

    def _released(self, job: Job, at: float) -> None:
        """The engine is done with a request that it worked on: stamp it, log it, queue its state's store."""
        job.trace.engine_stopped, job.trace.stopped_at_tokens = at, job.prefilled
        n = job.prefilled + job.emitted
        self.log.write(
            f"slot      release: id {job.trace.slot or 0:2d} | task {job.trace.arrival_index} | "
            f"stop processing: n_tokens = {n}, truncated = 0"
        )
        if self.s.housekeeping_s_per_token > 0 and n > 0:
            self._housekeeping.append((job, n))
        if job.trace.slot is not None and n > 0:
            self._slot_state[job.trace.slot] = [n, False, at]

    async def _housekeep(self) -> None:
        job, n = self._housekeeping.pop(0)
        job.trace.housekeeping_start = self._timeline_epoch()
        mib = n * 0.125  # an 8B model's KV state: 128 KiB a token (54K tokens -> ~6.7 GiB, as on the GPU)
        self.log.write(f"srv   prompt_save:  - saving prompt with length {n}, total state size = {mib:.3f} MiB")
        self.log.write(
            f"srv          load:  - making room for prompt cache entry, removing oldest entry (size = {mib:.3f} MiB)"
        )
        await self._advance(n * self.s.housekeeping_s_per_token)
        job.trace.housekeeping_end = self._timeline_epoch()
        self.log.write(
            f"srv  get_availabl: prompt cache update took "
            f"{(job.trace.housekeeping_end - job.trace.housekeeping_start) * 1000:.2f} ms"
        )

    def _launch(self, job: Job) -> None:
        """Take a slot for the job and log `processing task`; queue the idle-slot saves this launch sets off."""
        job.trace.launched = max(job.trace.arrived, self._timeline_epoch())
        others = self.active + ([self.long_job] if self.long_job else [])
        used = {j.trace.slot for j in others if j is not job and j.trace.slot is not None}
        free = [i for i in range(max(self.s.slots, len(used) + 1)) if i not in used]
        if self.s.idle_save_s_per_token > 0 or self.s.step_tokens > 0:  # llama.cpp: the least recently used slot
            job.trace.slot = min(free, key=lambda i: (self._slot_state.get(i, [0, False, float("-inf")])[2], i))
        else:
            job.trace.slot = free[0]
        self._slot_state.pop(job.trace.slot, None)
        self.log.write(
            f"slot launch_slot_: id {job.trace.slot:2d} | task {job.trace.arrival_index} | "
            "processing task, is_child = 0"
        )
        if self.s.idle_save_s_per_token > 0:
            for i, st in sorted(self._slot_state.items()):
                if i not in used and not st[1]:
                    self._idle_saves.append((job, i, st[0]))

    async def _idle_save(self) -> None:
        job, slot, n = self._idle_saves.pop(0)
        if job.trace.idle_save_start is None:
            job.trace.idle_save_start = self._timeline_epoch()
        if self.s.trace_log:
            self.log.write(f"slot process_sing: id {slot:2d} | task -1 | saving idle slot to prompt cache")
        await self._advance(n * self.s.idle_save_s_per_token)
        job.trace.idle_save_end = self._timeline_epoch()
        job.trace.idle_save_tokens += n
        if slot in self._slot_state:
            self._slot_state[slot][1] = True

    def _remove(self, job: Job) -> None:
        if job in self.active:
            self.active.remove(job)
        if job is self.long_job:
            self.long_job = None

    def _slots_used(self) -> int:
        return len(self.active)

    def _admit(self) -> None:
        for job in self.queue:  # taken in at this step boundary, whether or not a slot is free
            if job.trace.engine_intake is None:
                job.trace.engine_intake = max(job.trace.arrived, self._timeline_epoch())
        if self.s.cancel_aborts:  # without abort, a cancelled request is still prefilled when its turn comes
            for job in [j for j in self.queue if j.gone()]:
                self.queue.remove(job)
                self._cancel(job)
        if not self.s.yield_prefill or self.s.step_tokens > 0:
            while self.queue and self._slots_used() < self.s.slots:
                job = self.queue.popleft()
                self._start(job)
                if self.s.step_tokens > 0:  # launched now; its prompt waits for a step with room
                    self._launch(job)
            return
        for job in list(self.queue):
            if self._slots_used() >= self.s.slots:
                break
            if not job.long:
                self.queue.remove(job)
                self._start(job)
            elif self.long_job is None:
                # A long prompt starts with a slot like any request, then releases it while it is paused.
                self.queue.remove(job)
                self.long_job = job
                job.state = "prefill"
                self._cache_lookup(job)
            # else: a second long prompt waits; short ones behind it may still be admitted

    def _start(self, job: Job) -> None:
        job.state = "prefill"
        self.active.append(job)
        self._cache_lookup(job)

    def _cache_lookup(self, job: Job) -> None:
        """The prompt's cached blocks count as prefilled (a hit is never the whole prompt)."""
        if self.prefix_cache is None or job.cache_tokens is None:
            return
        hit = self.prefix_cache.lookup(block_hashes(job.cache_tokens, self.s.prefix_block_tokens), job.prompt_tokens)
        job.prefilled = job.trace.cached_tokens = hit

    def _cache_store(self, job: Job, answer: list[str]) -> None:
        if self.prefix_cache is not None and job.cache_tokens is not None:
            self.prefix_cache.store(block_hashes(job.cache_tokens + answer, self.s.prefix_block_tokens))

    # -- the loop ------------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._wake.clear()
            self._admit()
            if await self._work():
                self._gauges = self.counts()  # a step ended: the scheduler's stats go out with its output
                continue
            stalled = [j.stall_until for j in self.active if j.state == "decode" and j.stalled]
            timeout = max(0.0, min(stalled) - time.perf_counter()) if stalled else None
            await self._idle(timeout)

    async def _work(self) -> bool:
        if self._housekeeping:  # a synchronous store in the server loop: nobody prefills or decodes meanwhile
            await self._housekeep()
            return True
        if self._idle_saves:  # the same, right after a launch (llama.cpp's --cache-idle-slots)
            await self._idle_save()
            return True
        if self.s.step_tokens > 0:
            if self.active:
                await self._shared_step()
                return True
            return False
        pending = next((j for j in self.active if j.state == "prefill"), None)
        if pending is not None:
            await self._prefill_all(pending)
            return True
        if self.long_job is not None:
            if self._decoders() and self._steps_since_chunk < self.s.yield_decode_steps:
                self._steps_since_chunk += 1
                await self._decode_step()
            else:
                self._steps_since_chunk = 0
                await self._prefill_chunk(self.long_job)
            return True
        if self._decoders():
            await self._decode_step()
            return True
        return False

    def _decoders(self) -> list[Job]:
        now = time.perf_counter()
        out = []
        for j in self.active:
            if j.state != "decode":
                continue
            if j.stalled and now >= j.stall_until:
                j.stalled = False
            if not j.stalled:
                out.append(j)
        return out

    async def _prefill_all(self, job: Job) -> None:
        while job.state == "prefill":
            await self._prefill_chunk(job)

    async def _prefill_chunk(self, job: Job) -> None:
        if job.trace.prefill_start is None:
            self._launch(job)
            while self._idle_saves:
                await self._idle_save()
            job.trace.prefill_start = max(job.trace.arrived, self._timeline_epoch())
        n = min(self.s.prefill_chunk, job.prompt_tokens - job.prefilled)
        batch = self.s.cancel_batch_tokens
        if batch > 0:  # chunks end on batch boundaries, where a cancel may be honoured
            n = min(n, batch - job.prefilled % batch)
        await self._advance(n / self.s.prefill_rate)
        if job.state == "done":  # killed by a new request meanwhile (--kill-on-new-request)
            return
        job.prefilled += n
        if job.prefilled >= job.prompt_tokens:
            self._prefill_done(job)
        elif self.s.cancel_aborts and job.gone() and (batch <= 0 or job.prefilled % batch == 0):
            self._remove(job)
            self._cancel(job)

    def _prefill_done(self, job: Job) -> None:
        job.trace.prefill_done = self._timeline_epoch()
        self._cache_store(job, [])
        if job.gone():  # also reached when the cancelled prefill was allowed to run on
            self._remove(job)
            self._cancel(job)
            return
        others = len([j for j in self.active if j is not job]) + (
            1 if self.long_job is not None and self.long_job is not job else 0
        )
        job.output = job.make_output(others > 0)
        if job is self.long_job:
            self.long_job = None
            self.active.append(job)
        job.state = "decode"
        if self.s.decode_jitter > 0:
            job.pace = math.exp(self.s.decode_jitter * self._pace.gauss(0.0, 1.0))
        job.outbox.put_nowait((PREFILLED,))

    def _combined_rate(self, b: int) -> float:
        slots = self.s.slots
        if slots <= 1:
            return self.s.decode_rate
        frac = (min(b, slots) - 1) / (slots - 1)
        return self.s.decode_rate + (self.s.batch_decode_rate - self.s.decode_rate) * frac

    async def _decode_step(self) -> None:
        for j in [j for j in self.active if j.state == "decode" and j.gone()]:
            self._remove(j)
            self._cancel(j)
        # A request's first token goes out before the others of the same step: it is the one being timed (TTFT),
        # and on a busy client the chunks of one step are read in the order they were written.
        batch = sorted(self._decoders(), key=lambda j: j.emitted > 0)
        if not batch:
            return
        pace = sum(j.pace for j in batch) / len(batch)
        await self._advance(len(batch) / self._combined_rate(len(batch)) * pace)
        self._emit(batch)

    async def _shared_step(self) -> None:
        """One llama.cpp-style step of up to `step_tokens` tokens: a token for each decoding request, then prompt
        tokens of the launched requests in launch order, as far as the step has room."""
        for j in [j for j in self.active if j.state == "decode" and j.gone()]:
            self._remove(j)
            self._cancel(j)
        if self.s.cancel_aborts:  # launched, nothing prefilled yet: released at once
            for j in [j for j in self.active if j.state == "prefill" and j.prefilled == 0 and j.gone()]:
                self._remove(j)
                self._cancel(j)
        decoders = sorted(self._decoders(), key=lambda j: j.emitted > 0)
        room = self.s.step_tokens - len(decoders)
        parts: list[tuple[Job, int]] = []
        for job in sorted((j for j in self.active if j.state == "prefill"), key=lambda j: j.trace.launched or 0.0):
            if room <= 0:
                break
            n = min(room, job.prompt_tokens - job.prefilled)
            if job.trace.prefill_start is None:
                job.trace.prefill_start = max(job.trace.arrived, self._timeline_epoch())
            parts.append((job, n))
            room -= n
        if not parts and not decoders:
            await self._advance(0.001)  # only stalled decoders: wait a little
            return
        seconds = sum(n for _, n in parts) / self.s.prefill_rate
        if decoders:
            pace = sum(j.pace for j in decoders) / len(decoders)
            seconds += len(decoders) / self._combined_rate(len(decoders)) * pace
        await self._advance(seconds)
        batch = self.s.cancel_batch_tokens
        for job, n in parts:
            if job.state != "prefill":  # killed by a new request meanwhile
                continue
            job.prefilled += n
            if job.prefilled >= job.prompt_tokens:
                self._prefill_done(job)
            elif (
                self.s.cancel_aborts
                and job.gone()
                and (batch <= 0 or job.prefilled // batch > (job.prefilled - n) // batch)
            ):
                self._remove(job)
                self._cancel(job)
        if decoders:
            self._emit(decoders)

    def _emit(self, batch: list[Job]) -> None:
        """The tokens of one decode step for each request of the batch (ends, stalls)."""
        now = time.perf_counter()
        for job in batch:
            if job.state != "decode":
                continue
            assert job.output is not None
            before = job.emitted
            # One verify pass: with --spec-accept it emits the accepted drafts and its own token, one chunk each.
            got = self.spec.step(len(job.output.tokens) - job.emitted)
            if self.spec.enabled:  # llama.cpp's per-request timings.draft_n / draft_n_accepted
                job.trace.draft_n += len(self.spec.accept)
                job.trace.draft_n_accepted += got - 1
            for _ in range(got):
                channel, text = job.output.tokens[job.emitted]
                job.emitted += 1
                job.outbox.put_nowait((TOKEN, channel, text))
            if job.emitted >= len(job.output.tokens):
                job.state = "done"
                if self.prefix_cache is not None:
                    self._cache_store(job, tokenize(job.output.content_text))
                self._remove(job)
                self._released(job, self._timeline_epoch())
                job.outbox.put_nowait((END, job.output.finish_reason))
            elif (
                job.fault is not None
                and job.fault.kind == "stall"
                and before < job.fault.at_token(len(job.output.tokens)) <= job.emitted
            ):
                job.stalled = True
                job.trace.fault = job.trace.fault or "stall"
                job.stall_until = now + self.s.stall_s / self.s.time_scale
