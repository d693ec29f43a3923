"""The server's own evidence in a stress run directory, read for the verdicts: its log lines and its /metrics.

Reads `server_log.jsonl` (the `--server-log` follower's lines, each stamped when read) and `metrics.jsonl` (the
sampler's scrapes) from the run directory alone, so verdicts can be recomputed from an old run. Log lines are
llama.cpp's wording (tools/server: `launch_slot_` "processing task", `stop: cancel task, id_task = N`, `release`
"stop processing: n_tokens = N", the prompt cache's "making room for prompt cache entry" / "saving prompt"), and
llama-cpp-python's `Llama.generate: N prefix-match hit, remaining M prompt tokens to eval` (it starts a request).
vLLM's step lines (at DEBUG) with its `Added request` / `Aborted request(s)` lines are `steps` (vllm_steps.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, cast

from evalkit.evidence.log_lines import LogLine
from evalkit.evidence.vllm_steps import StepLog, read_step_log
from evalkit.runs.rundir import read_jsonl

if TYPE_CHECKING:
    from evalkit.evidence.server_metrics import ScrapeLine

LOG_FILE = "server_log.jsonl"
METRICS_FILE = "metrics.jsonl"

_LAUNCH = re.compile(r"id\s+(\d+)\s*\|\s*task\s+(\d+)\s*\|\s*processing task")
_CANCEL = re.compile(r"cancel task, id_task = (\d+)")
# The task's own prompt time as it ends (print_timing): the same figure as its `timings.prompt_ms`, to the 0.01 ms.
_PROMPT_EVAL = re.compile(r"id\s+(\d+)\s*\|\s*task\s+(\d+)\s*\|\s*prompt eval time =\s*([\d.]+) ms")
_STOP = re.compile(r"id\s+(\d+)\s*\|\s*task\s+(\d+)\s*\|\s*stop processing: n_tokens = (\d+)")
_CACHE = re.compile(
    r"making room for prompt cache entry|saving prompt with length|updating prompt cache|"
    r"prompt cache update took"
)
# llama-cpp-python's server (one model behind one lock: one request at a time) as it starts evaluating a request.
_BEGIN = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt tokens to eval")
# llama.cpp's trace level (`-lv 4`) names the idle-slot save that `--cache-idle-slots` (on by default with
# `--cache-ram`) runs right after a task is launched (server-context.cpp, SERVER_TASK_TYPE_COMPLETION): silent at the
# default level, where only "making room for prompt cache entry" shows when the cache is full.
_IDLE_SAVE = re.compile(r"saving idle slot to prompt cache")
# FastLLM's scheduler line: requests it decodes (alive) and holds (pending), every few seconds.
_FASTLLM_DECODE = re.compile(r"\[Decode\] alive = (\d+), pending = (\d+)")
# llama.cpp's own timestamp at the start of a line (common/log.cpp: minutes.seconds.ms.us since the log started).
_STAMP = re.compile(r"^\s*(\d+)\.(\d{2})\.(\d{3})\.(\d{3})\s")

# Gauges of requests the engine is working on and requests it holds in its queue, by server.
RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs", "llamacpp:requests_processing")
WAITING = ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "llamacpp:requests_deferred")


@dataclass(frozen=True)
class LogEvent:
    """One llama.cpp-style log line that matters to a verdict: a task launched, cancelled, stopped, or cache work."""

    t: float
    kind: str  # launch | cancel | stop | cache | idle_save | prompt_eval | begin (one-at-a-time server's start)
    task: int | None = None
    slot: int | None = None
    n_tokens: int | None = None
    line: str = ""
    # When the follower's read before this one ran (the line was written in (t_after, t]); None: unknown.
    t_after: float | None = None
    stamped: bool = False  # t is the server's own stamp put on evalkit's clock (LogClock), not the read time
    value: float | None = None  # prompt_eval: the task's prompt time in ms


@dataclass(frozen=True)
class Gauge:
    """One scrape's running and waiting request counts (summed over label sets)."""

    t: float
    running: float
    waiting: float
    source: str = "metrics"  # metrics | log (FastLLM's `[Decode] alive = N, pending = M`)


@dataclass(frozen=True)
class ServerEvidence:
    """What the server said during the run: parsed log events and gauge samples; empty when it said nothing."""

    log: tuple[LogEvent, ...] = ()
    gauges: tuple[Gauge, ...] = ()
    scrapes: tuple[ScrapeLine, ...] = field(default=(), repr=False)
    clock: LogClock | None = None  # the log's own timestamps on evalkit's clock, when it has them
    steps: StepLog | None = None  # vLLM's step, added and aborted lines, in the log's order (at DEBUG)

    @property
    def has_log(self) -> bool:
        """Whether the log shows any task line (a log without them cannot settle a verdict)."""
        return any(e.kind in ("launch", "stop") for e in self.log)

    @property
    def has_gauges(self) -> bool:
        """Whether /metrics gave running/waiting gauges."""
        return bool(self.gauges)

    def events(self, kind: str, t0: float = float("-inf"), t1: float = float("inf")) -> list[LogEvent]:
        """Log events of one kind that may have happened within [t0, t1]: read at or after t0, and written (after the
        follower's previous read) by t1. A line is read up to a poll, or more on a loaded machine, after it was
        written, and the client's chunk times are the kernel's: a window closing at a request's server-side start
        must not miss the line written just before it."""
        return [
            e
            for e in self.log
            if e.kind == kind and t0 <= e.t and (e.t if e.t_after is None else min(e.t, e.t_after)) <= t1
        ]


def parse_log_line(t: float, line: str) -> LogEvent | None:
    """The event a log line records, or None for lines no verdict reads."""
    if m := _LAUNCH.search(line):
        return LogEvent(t, "launch", task=int(m.group(2)), slot=int(m.group(1)), line=line)
    if m := _STOP.search(line):
        return LogEvent(t, "stop", task=int(m.group(2)), slot=int(m.group(1)), n_tokens=int(m.group(3)), line=line)
    if m := _PROMPT_EVAL.search(line):
        return LogEvent(
            t, "prompt_eval", task=int(m.group(2)), slot=int(m.group(1)), value=float(m.group(3)), line=line
        )
    if m := _CANCEL.search(line):
        return LogEvent(t, "cancel", task=int(m.group(1)), line=line)
    if _CACHE.search(line):
        return LogEvent(t, "cache", line=line)
    if _IDLE_SAVE.search(line):
        return LogEvent(t, "idle_save", line=line)
    if m := _BEGIN.search(line):
        return LogEvent(t, "begin", n_tokens=int(m.group(1)) + int(m.group(2)), line=line)
    return None


def server_stamp(line: str) -> float | None:
    """Seconds since the server's log started, from llama.cpp's own line prefix (`M.SS.mmm.uuu`), or None."""
    m = _STAMP.match(line)
    if not m:
        return None
    return int(m.group(1)) * 60 + int(m.group(2)) + int(m.group(3)) / 1e3 + int(m.group(4)) / 1e6


@dataclass(frozen=True)
class LogClock:
    """The server's log clock against evalkit's: epoch = stamp + offset, known within (lo, offset]."""

    offset: float
    lo: float
    lines: int

    @property
    def bound_s(self) -> float:
        """How far the calibrated times may be late (the tightest read of a line after it was written)."""
        return self.offset - self.lo


def calibrate(rows: list[LogLine]) -> LogClock | None:
    """Fit the server's log stamps to the follower's read times: each line was written in (t_after, t], so the
    offset lies in (max(t_after - stamp), min(t - stamp)]. None without stamps, with stamps that go backwards (a
    restarted server) or when the window is wider than 50 ms (nothing read promptly)."""
    pts = [
        (float(r["t"]), r.get("t_after"), st)
        for r in rows
        if isinstance(r.get("line"), str)
        and isinstance(r.get("t"), (int, float))
        and not r.get("earlier")
        and (st := server_stamp(r["line"])) is not None
    ]
    if len(pts) < 3 or any(b[2] < a[2] for a, b in zip(pts, pts[1:])):
        return None
    hi = min(t - st for t, _, st in pts)
    afters = [a - st for _, a, st in pts if isinstance(a, (int, float))]
    lo = max(afters) if afters else hi - 0.05
    if hi - lo > 0.05 or lo > hi + 0.005:
        return None
    return LogClock(hi, min(lo, hi), len(pts))


def _sum_of(series: dict[str, float], names: tuple[str, ...]) -> float | None:
    found = [v for k, v in series.items() if k.split("{", 1)[0] in names]
    return sum(found) if found else None


def read_evidence(run_path: Path) -> ServerEvidence:
    """The log events and gauge samples of one run directory (either file may be missing). A llama.cpp log with its
    own timestamps is put on evalkit's clock (`calibrate`), so each event carries when it was written, not read."""
    log = []
    rows = cast(list[LogLine], read_jsonl(run_path / LOG_FILE))
    clock = calibrate(rows)
    log_gauges = []
    for r in rows:
        if isinstance(r.get("line"), str) and isinstance(r.get("t"), (int, float)):
            if m := _FASTLLM_DECODE.search(r["line"]):
                log_gauges.append(Gauge(float(r["t"]), float(m.group(1)), float(m.group(2)), "log"))
            e = parse_log_line(float(r["t"]), r["line"])
            if e is None:
                continue
            st = server_stamp(r["line"]) if clock is not None else None
            if st is not None and not r.get("earlier"):
                log.append(replace(e, t=st + clock.offset, t_after=None, stamped=True))  # type: ignore[union-attr]  # st is set only when clock is
                continue
            after = r.get("t_after")
            log.append(replace(e, t_after=float(after)) if isinstance(after, (int, float)) else e)
    scrapes = tuple(
        cast("ScrapeLine", r) for r in read_jsonl(run_path / METRICS_FILE) if r.get("ok") and r.get("series")
    )
    gauges = []
    for s in scrapes:
        running, waiting = _sum_of(s["series"], RUNNING), _sum_of(s["series"], WAITING)
        if running is not None:
            gauges.append(Gauge(float(s["t"]), running, waiting or 0.0))
    gauges.extend(log_gauges)
    return ServerEvidence(
        tuple(sorted(log, key=lambda e: e.t)),
        tuple(sorted(gauges, key=lambda g: g.t)),
        scrapes,
        clock,
        read_step_log(rows),
    )
