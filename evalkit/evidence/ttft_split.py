"""Every request's time to first token, split: before the server launched it into a slot, in the launched slot
before its own prefill began, its own prefill, its first step.

A server that shares each step (batch) between its slots (llama.cpp with `-np 2`) launches a request into a free
slot at once, but its prompt enters a step only when the batch has room: while another slot's long prompt fills
every `-b` tokens, the launched request waits in its slot (`in_slot_s`), which is neither waiting for a free slot
(`before_start_s`) nor its own prefill. A silent pause between a launch and the prefill (llama.cpp's idle-slot save,
`--cache-idle-slots`) also lands in `in_slot_s`; diagnose names it only when the log or the other requests show it.

The split rests on the best evidence the run has, named in each record:
- `timings`: llama.cpp's per-request `prompt_ms` (its prompt processing, ending when the first token is sampled);
  what is left of the TTFT came before the server started on the request (queue, a busy slot, housekeeping).
- `log`: the server log's `processing task` line marks when the server started on it (with timings, the
  remainder after the prefill is the first decode step and the network).
- `metrics`: vLLM's /metrics TTFT and prefill-time histograms, when the request was the only one counted between
  two scrapes (so the histograms' change is its own): before the start is TTFT less prefill, which holds the
  queue and any engine step it waited out (vLLM's queue time alone misses the step: its engine core takes a
  request in only between steps).
- `client`: the client's clock alone, which cannot split a TTFT at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from evalkit.evidence.request_lines import RequestLineJson, ServerTimings
from evalkit.evidence.server_evidence import LogEvent, ServerEvidence

if TYPE_CHECKING:
    from evalkit.evidence.server_metrics import ScrapeLine

# The log follower stamps a line when it reads it (every ~50 ms), so a line may be read this long after it happened.
LOG_SLACK_S = 0.15
IN_SLOT_MIN_S = 0.01  # a launch this close to its prefill start is one moment


class TtftSplitJson(TypedDict):
    """A `TtftSplit` as summary.json lists it (`TtftSplit.to_json`), its fields in order."""

    request_id: str
    ttft_s: float | None
    before_start_s: float | None
    prefill_s: float | None
    first_step_s: float | None
    server_start: float | None
    evidence: str
    prompt_n: int | None
    cache_n: int | None
    decode_s_per_token: float | None
    task: int | None
    slot: int | None
    launched: float | None
    in_slot_s: float | None
    draft_n: int | None
    draft_n_accepted: int | None


class _Extra(TypedDict, total=False):
    """The optional parts of a split that every kind of evidence may carry."""

    task: int | None
    slot: int | None
    prompt_n: int | None
    cache_n: int | None
    draft_n: int | None
    draft_n_accepted: int | None
    decode_s_per_token: float | None


@dataclass(frozen=True)
class TtftSplit:
    """One request's TTFT in parts (seconds), when the server started on it (epoch), and the evidence used."""

    request_id: str
    ttft_s: float | None
    before_start_s: float | None  # until it was launched: queue, no free slot, housekeeping after another request
    prefill_s: float | None  # its own prefill, as the server timed it
    first_step_s: float | None  # after the prefill until the first token reached the client (log only)
    server_start: float | None  # when its own prefill began (epoch)
    evidence: str  # timings | log | metrics | client
    prompt_n: int | None = None  # prompt tokens the server processed (timings)
    cache_n: int | None = None  # prompt tokens it took from its cache (timings)
    decode_s_per_token: float | None = None  # the server's decode time per token (timings)
    task: int | None = None  # the server's task id (log)
    slot: int | None = None  # the slot it was launched into (log)
    launched: float | None = None  # when the server launched it into a slot (log; epoch)
    in_slot_s: float | None = None  # launched, waiting for a step with room (or a silent pause) before its prefill
    draft_n: int | None = None  # tokens drafted for it (llama.cpp timings, speculative decoding)
    draft_n_accepted: int | None = None  # ... of which the target model accepted

    def to_json(self) -> TtftSplitJson:
        """The record as summary.json lists it."""
        return {
            "request_id": self.request_id,
            "ttft_s": self.ttft_s,
            "before_start_s": self.before_start_s,
            "prefill_s": self.prefill_s,
            "first_step_s": self.first_step_s,
            "server_start": self.server_start,
            "evidence": self.evidence,
            "prompt_n": self.prompt_n,
            "cache_n": self.cache_n,
            "decode_s_per_token": self.decode_s_per_token,
            "task": self.task,
            "slot": self.slot,
            "launched": self.launched,
            "in_slot_s": self.in_slot_s,
            "draft_n": self.draft_n,
            "draft_n_accepted": self.draft_n_accepted,
        }


def _timings(r: RequestLineJson) -> ServerTimings | None:
    t = r.get("server_timings")
    return t if isinstance(t, dict) and isinstance(t.get("prompt_ms"), (int, float)) else None


def _end(r: RequestLineJson) -> float | None:
    return r.get("t_first_token") or r.get("t_done")


def _by_release(lines: list[RequestLineJson], ev: ServerEvidence) -> dict[str, LogEvent]:
    """Requests with timings matched to their task through its release line: llama.cpp's `stop processing:
    n_tokens = N` counts cache_n + prompt_n + predicted_n - 1 (the last token never enters the cache), and comes as
    the request ends. This holds where launch times mislead (a silent pause between a launch and its prefill)."""
    launches = {e.task: e for e in ev.events("launch")}
    stops = [e for e in ev.events("stop") if e.task in launches and e.n_tokens is not None]
    prompt_ms = {e.task: e.value for e in ev.events("prompt_eval")}
    out: dict[str, LogEvent] = {}
    used: set[int | None] = set()
    for r in sorted(lines, key=lambda x: x.get("t_sent") or 0.0):
        t = _timings(r)
        done = r.get("t_done")
        if t is None or done is None or r.get("status") != "ok":
            continue
        n = (t.get("cache_n") or 0) + (t.get("prompt_n") or 0) + (t.get("predicted_n") or 0) - 1
        first = r.get("t_first_token") or done
        # Its prefill began at first token - prompt_ms; its launch came before that (a read stamp may be a poll late).
        start = first - t["prompt_ms"] / 1000
        cands = [
            e
            for e in stops
            if e.task not in used
            and abs(e.n_tokens - n) <= 2  # type: ignore[operator]  # stops with a token count only
            and first - LOG_SLACK_S <= e.t <= done + 0.5
            and (r.get("t_sent") or 0.0) - 0.05
            <= launches[e.task].t
            <= start + (IN_SLOT_MIN_S if launches[e.task].stamped else LOG_SLACK_S)
        ]
        same = [e for e in cands if (pm := prompt_ms.get(e.task)) is not None and abs(pm - t["prompt_ms"]) < 0.01]
        cands = same or cands  # its own prompt eval time, printed to 0.01 ms, tells it from any twin
        if cands:
            # Requests that end in one step end together: then the server's queue order (first sent, first launched)
            # tells them apart.
            pick = min(cands, key=lambda e: (abs(e.t - done) > 0.05, launches[e.task].t))
            used.add(pick.task)
            out[r["request_id"]] = launches[pick.task]
    return out


def match_launches(lines: list[RequestLineJson], ev: ServerEvidence) -> dict[str, LogEvent]:
    """Each request's `processing task` log line: through its release line when it has timings, else inside its
    window, nearest to where timings put its start."""
    out = _by_release(lines, ev)
    taken = {e.task for e in out.values()}
    free = [e for e in ev.events("launch") if e.task not in taken]
    for r in sorted(lines, key=lambda x: x.get("t_sent") or 0.0):
        end = _end(r)
        sent = r.get("t_sent")
        if r["request_id"] in out or sent is None or end is None:
            continue
        cands = [e for e in free if sent - 0.02 <= e.t <= end + LOG_SLACK_S]
        if not cands:
            continue
        t = _timings(r)
        ff = r.get("t_first_token")
        if t is not None and ff is not None:
            expected = ff - t["prompt_ms"] / 1000
            pick = min(cands, key=lambda e: abs(e.t - expected))
        else:
            pick = cands[0]
        free.remove(pick)
        out[r["request_id"]] = pick
    return out


def _uncounted(o: RequestLineJson) -> bool:
    """A request vLLM never counts in its request histograms: cancelled before any first token reached the client
    (the front end drops an aborted request before its output, so no TTFT, and it never finishes)."""
    return o.get("status") == "cancelled" and o.get("t_first_token") is None


def _metrics_window(
    r: RequestLineJson, lines: list[RequestLineJson], ev: ServerEvidence
) -> tuple[ScrapeLine, ScrapeLine] | None:
    """The scrapes just before the request was sent and just after it ended, when it alone was in flight between
    them (besides requests the server never counts, `_uncounted`); None otherwise."""
    sent, done = r.get("t_sent"), r.get("t_done")
    if not ev.scrapes or sent is None or done is None:
        return None
    before = [s for s in ev.scrapes if s["t"] <= sent]
    after = [s for s in ev.scrapes if s["t"] >= done]
    if not before or not after:
        return None
    s0, s1 = before[-1], after[0]
    for o in lines:
        o_sent = o.get("t_sent")
        if o is r or o_sent is None or _uncounted(o):
            continue
        if o_sent < s1["t"] and (o.get("t_done") or float("inf")) > s0["t"]:
            return None  # another request shared the window: the change is not this one's alone
    return s0, s1


def _metrics_part(window: tuple[ScrapeLine, ScrapeLine], suffix: str) -> float | None:
    """The change of a histogram's sum across the request's window (`_metrics_window`), when the histogram counted
    one request there."""
    s0, s1 = window

    def total(series: dict[str, float], tail: str) -> float | None:
        vals = [v for k, v in series.items() if k.split("{", 1)[0].endswith(suffix + tail)]
        return sum(vals) if vals else None

    c0, c1 = total(s0["series"], "_count"), total(s1["series"], "_count")
    v0, v1 = total(s0["series"], "_sum"), total(s1["series"], "_sum")
    if None in (c0, c1, v0, v1) or c1 - c0 != 1:  # type: ignore[operator]  # the None check comes first
        return None
    return v1 - v0  # type: ignore[operator]  # none is None here


def split_one(
    r: RequestLineJson, launch: LogEvent | None, lines: list[RequestLineJson], ev: ServerEvidence
) -> TtftSplit:
    """The split of one request from the best evidence there is for it."""
    ttft = r.get("ttft_s")
    ff = r.get("t_first_token")
    sent = r.get("t_sent")
    t = _timings(r)
    extra: _Extra = {"task": launch.task if launch else None, "slot": launch.slot if launch else None}
    if t is not None:
        extra.update(
            {
                "prompt_n": t.get("prompt_n"),
                "cache_n": t.get("cache_n"),
                "draft_n": t.get("draft_n"),
                "draft_n_accepted": t.get("draft_n_accepted"),
            }
        )
        if t.get("predicted_n") and t.get("predicted_ms") is not None:
            extra["decode_s_per_token"] = t["predicted_ms"] / 1000 / t["predicted_n"]
    if t is not None and ff is not None and ttft is not None:
        timed = t["prompt_ms"] / 1000
        if launch is not None:
            start = ff - timed  # prompt_ms runs from its first prompt token in a step to its first token
            # A line's time is never earlier than it was written (read stamps are late, calibrated ones hardly), so
            # start - launch.t is a lower bound of the time in the slot: never made up, only missed by a poll.
            launched = min(launch.t, start)
            in_slot = start - launched if start - launched > IN_SLOT_MIN_S else 0.0
            return TtftSplit(
                r["request_id"],
                ttft,
                max(0.0, launched - r["t_sent"]),  # what `sent` holds: timings come with a send time
                timed,
                None,
                start,
                "timings+log",
                launched=launched,
                in_slot_s=in_slot,
                **extra,
            )
        return TtftSplit(r["request_id"], ttft, max(0.0, ttft - timed), timed, None, ff - timed, "timings", **extra)
    if launch is not None:
        before = max(0.0, launch.t - sent) if sent is not None else None
        prefill = (ff - launch.t) if ff is not None else None
        return TtftSplit(r["request_id"], ttft, before, prefill, None, launch.t, "log", launched=launch.t, **extra)
    # vLLM's TTFT runs from the front end's arrival; its queue time only from when the engine core took the request
    # in, between two steps: a wait behind a running step is in the one and not the other. Before the server
    # started on it is therefore TTFT less prefill (queue and any step it waited out), never the queue time alone.
    window = _metrics_window(r, lines, ev)
    server_ttft = _metrics_part(window, "time_to_first_token_seconds") if window else None
    prefill = _metrics_part(window, "request_prefill_time_seconds") if window else None
    if window and server_ttft is not None and prefill is not None and ttft is not None and sent is not None:
        before = max(0.0, server_ttft - prefill)
        decode = _metrics_part(window, "request_decode_time_seconds")
        done_tokens = r.get("completion_tokens") or 0
        if decode is not None and done_tokens > 1 and "decode_s_per_token" not in extra:
            extra["decode_s_per_token"] = decode / (done_tokens - 1)
        return TtftSplit(r["request_id"], ttft, before, prefill, None, sent + before, "metrics", **extra)
    return TtftSplit(r["request_id"], ttft, None, None, None, None, "client", **extra)


def split_all(lines: Iterable[RequestLineJson], ev: ServerEvidence) -> dict[str, TtftSplit]:
    """The split of every request line, by request id."""
    typed = [r for r in lines if r.get("request_id")]
    launches = match_launches(typed, ev)
    return {r["request_id"]: split_one(r, launches.get(r["request_id"]), typed, ev) for r in typed}
