"""Verdicts on the server's scheduler, each yes / no / can't tell, resting on the per-request TTFT split.

Every verdict names its evidence (`timings`, `log`, `metrics`, `client`), gives the figures it rests on, and for
"can't tell" says what evidence would tell. A verdict is given only when the evidence settles it: on a real GPU
server a client-only reading called an aborting cancel "not aborting" (the next request waited for the server's
prompt-cache store) and a long request "hurt by inserts" (its own prefill was as fast; the wait came before it).
Everything here is a pure function of the run directory's files (requests.jsonl, metrics.jsonl, server_log.jsonl).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from evalkit.evidence.prefix_cache_counters import hit_rate
from evalkit.evidence.server_evidence import ServerEvidence
from evalkit.evidence.ttft_split import LOG_SLACK_S, TtftSplit, split_all
from evalkit.evidence.vllm_steps import EVIDENCE as STEPS
from evalkit.evidence.vllm_steps import EVIDENCE_WORDS as STEPS_WORDS
from evalkit.evidence.vllm_steps import cancel_steps, short_steps
from evalkit.evidence.wait_parts import (
    CACHE_STORE,
    CANCELLED_BEFORE_LAUNCH,
    CANCELLED_CACHE_STORE,
    CANCELLED_IN_SLOT,
    IDLE_SAVE,
    SILENT_WOULD_TELL,
    UNATTRIBUTED,
    WORDS,
    attribute,
    cause_words,
    held,
    silent_gaps,
)
from evalkit.redact import excerpt
from evalkit.runs.rundir import Line
from evalkit.stats import median
from evalkit_stress.verdicts import (
    CANT,
    NO,
    NOT_EXERCISED,
    YES,
    CancelSample,
    CancelVerdict,
    ConcurrencyFigures,
    ConcurrencyVerdict,
    Diagnosis,
    Figures,
    HeadOfLineFigures,
    HeadOfLineSample,
    HeadOfLineVerdict,
    LongHurtVerdict,
    NextDelay,
)

__all__ = ["CANT", "NO", "NOT_EXERCISED", "YES", "diagnose", "diagnosis_lines"]
LONGER_PROMPT = (
    "a longer long prompt (--long-tokens) whose prefill outlasts the planned times, or the server's "
    "log (--server-log) if it shows scheduling"
)
FRESH_PROMPTS = (
    "long prompts the server has not seen (stress salts them per run unless --reuse-prompts), or its prefix cache reset"
)
# What tells a cancel's fate, by server: llama.cpp logs the stop; vLLM logs the abort as its engine takes it in.
CANCEL_LOG = (
    "the server's log (--server-log: llama.cpp's 'stop processing' line after the cancel; vLLM's step log, with "
    "--enable-log-requests and VLLM_LOGGING_LEVEL=DEBUG: its 'Aborted request' line among the engine's steps)"
)
# An unattributed wait on a server seen only through /metrics (vLLM, SGLang): llama.cpp's trace-log advice is no use.
ENGINE_LOG = (
    "the server's log with its request lines (--server-log; vLLM: --enable-log-requests, and VLLM_LOGGING_LEVEL=DEBUG "
    "for a line per engine step), to say what the engine ran in the wait"
)
WARM_CACHE = 0.5  # the server's counters say its cache served at least half the run's prompt tokens
HURT_RATIO = 1.10  # a long request's own prefill 10% slower with inserts than alone
STARTED_EARLY = 0.5  # a next request that started within half the prefill left at the cancel was not held by it
SENT_SETTLE_S = 0.05  # a request sent this recently may not be in the server's gauges yet
RAN_ON = 0.8  # ... one that waited 80% of it or more may have been
# A one-at-a-time server's log shows when it started the next request, so only the prefill rate is estimated (from
# the same prompt alone): CI saw two prefills of one prompt in one run take 38.1 s and 31.2 s (the next start came
# at 0.798 of the prefill left), so this bound leaves room for that.
RAN_ON_SERIAL = 0.6
# ... and it calls a next start that came early an abort only when the server had been on the cancelled request for
# under this share of the prompt's prefill alone: a prefill that ran to its end takes about its time alone (0.82x in
# that CI run), so a start that came early only because the prefill ran faster than alone is not read as an abort.
SERVED_SHORT = 0.6
DECODE_SLOWED = 1.25  # a next request decoding 25% slower than alone shares the engine with something
# A decode rate read from fewer tokens than this is a clock's noise, not a speed: the built-in cycle's shorts answer
# in 1-4 tokens, and a one-token reply's "decode time" (llama.cpp's predicted_ms) is a few microseconds of nothing.
# CI read the after build's next request as 1.49x slower than alone from such replies (#41): its cancel verdict
# came out "can't tell" or "yes" by chance.
DECODE_TIMED_TOKENS = 8
AT_ONCE_S = 0.06  # a stop logged this soon after the cancel is "at once" (the log is read every ~50 ms)
# A prefill step (a chunk, a batch) a server may finish before it looks at a cancel: llama.cpp's -b default, vLLM's
# chunked-prefill budget, the sim's --prefill-chunk. A cancel with no more than this left lands in the last step,
# where an engine that stops at step boundaries and one that runs on both end with the prompt (issue 39).
LAST_STEP_TOKENS = 2048
TOGETHER, TOOK_TURNS = 1.7, 1.3  # effective concurrency of two streams: served together / took turns


def _decode_timed(r: Line) -> bool:
    """Whether a reply decoded enough tokens for its decode rate to say how fast the engine ran."""
    t = r.get("server_timings") or {}
    n = t.get("predicted_n") if isinstance(t, dict) else None
    return max(n or 0, r.get("completion_tokens") or 0) >= DECODE_TIMED_TOKENS


def _ok(lines: list[Line], scenario: str, role: str) -> list[Line]:
    return [
        r
        for r in lines
        if r.get("scenario") == scenario
        and r.get("role") == role
        and r.get("status") == "ok"
        and r.get("ttft_s") is not None
    ]


def _server_side(s: TtftSplit | None) -> bool:
    return s is not None and s.evidence != "client"


def _best(evidences: list[str]) -> str:
    for e in (STEPS, "timings+log", "log", "timings", "metrics", "client"):
        if e in evidences:
            return e
    return "client"


def _vote(verdicts: list[str]) -> str:
    """Yes or no when every settled sample agrees (or a majority, for head-of-line), else can't tell."""
    settled = [v for v in verdicts if v not in (CANT, NOT_EXERCISED)]
    if not settled:
        return NOT_EXERCISED if verdicts and all(v == NOT_EXERCISED for v in verdicts) else CANT
    yes, no = settled.count(YES), settled.count(NO)
    return YES if yes >= no else NO


class _Facts:
    """Per-run reference figures the verdicts share: the long prefill alone, a short alone, housekeeping."""

    def __init__(self, lines: list[Line], splits: dict[str, TtftSplit]) -> None:
        alone = _ok(lines, "long_alone", "long")
        server = [splits[r["request_id"]] for r in alone if _server_side(splits.get(r["request_id"]))]
        self.prefill_alone_server = median([s.prefill_s for s in server])
        self.prefill_alone_client = median([r["ttft_s"] for r in alone])
        rates = [s.prompt_n / s.prefill_s for s in server if s.prompt_n and s.prefill_s]
        self.prefill_tok_s = median(rates)
        shorts = _ok(lines, "short_baseline", "short")
        self.short_ttft = median([r["ttft_s"] for r in shorts])
        timed = [r for r in shorts if _decode_timed(r)]
        self.short_decode_server = median([splits[r["request_id"]].decode_s_per_token for r in timed])
        self.short_decode_client = median([1 / r["decode_tok_s"] for r in timed if r.get("decode_tok_s")])
        # The long request sent right after the long one alone finished: its wait is the housekeeping after a long.
        after = [splits[r["request_id"]] for r in _ok(lines, "short_insert", "long")]
        self.wait_after_long = median([s.before_start_s for s in after if _server_side(s)])

        self.from_cache: str | None = None  # set by diagnose: the server's cache served the long prompts

    @property
    def prefill_alone(self) -> float | None:
        return self.prefill_alone_server or self.prefill_alone_client


# -- cancel -------------------------------------------------------------------------------------------------------
def _cancel_from_log(
    c: Line, n: Line | None, splits: dict[str, TtftSplit], ev: ServerEvidence, facts: _Facts
) -> CancelSample | None:
    t_c = c["t_done"]
    task = splits[c["request_id"]].task
    if task is None:
        cancels = ev.events("cancel", t_c - 0.05)
        task = cancels[0].task if cancels else None
    if task is None:
        # No line names the cancelled request's task. Another task's `stop processing` line says nothing about
        # this one; but a log that records launches and shows none while it was in flight says it never started.
        return _never_started(c, n, splits, ev)
    stops = [e for e in ev.events("stop", t_c - 0.05) if e.task == task]
    if not stops:
        return None
    stop = stops[0]
    delay = max(0.0, stop.t - t_c)
    prompt = c.get("planned_prompt_tokens") or c.get("prompt_tokens")
    launch = next((e for e in ev.events("launch") if e.task == task), None)
    if launch is not None and launch.t >= t_c - 0.01 and stop.t - launch.t <= AT_ONCE_S:
        # Launched only after the cancel (the engine was busy, e.g. storing a prompt cache entry for its slot) and
        # released at once: nothing of it was prefilled; the release's n_tokens is the slot's cached prompt.
        out = CancelSample(
            YES,
            "log",
            granularity="before it started",
            engine_stopped=stop.t,
            figures={
                "stop_after_cancel_s": delay,
                "stopped_at_tokens": 0,
                "prompt_tokens": prompt,
                "slot_cached_tokens": stop.n_tokens,
                "launched_after_cancel_s": launch.t - t_c,
                "log_line": excerpt(stop.line.strip(), 160, one_line=False),
            },
        )
        out.judge_next(_next_delay(n, t_c, stop.t, splits, ev, held_from=c["t_sent"]))
        return out
    if prompt:
        aborted = stop.n_tokens is not None and stop.n_tokens < 0.98 * prompt
    else:
        left = _left(c, splits, facts)
        if left is None:
            return None
        aborted = delay < STARTED_EARLY * left
    gran = "only at the end" if not aborted else "at once" if delay <= AT_ONCE_S else "at a batch boundary"
    figures: Figures = {
        "stop_after_cancel_s": delay,
        "stopped_at_tokens": stop.n_tokens,
        "prompt_tokens": prompt,
        "log_line": excerpt(stop.line.strip(), 160, one_line=False),
    }
    if facts.prefill_tok_s:
        figures["tokens_after_cancel_est"] = round(delay * facts.prefill_tok_s)
    out = CancelSample(YES if aborted else NO, "log", figures, granularity=gran, engine_stopped=stop.t)
    out.judge_next(_next_delay(n, t_c, stop.t, splits, ev))
    return out


def _cancel_from_steps(c: Line, n: Line | None, lines: list[Line], ev: ServerEvidence) -> CancelSample | None:
    """vLLM's step log (at DEBUG): the cancelled prompt's tokens in the engine steps around its `Aborted request(s)`
    line. Engine steps are not interrupted, so a prompt whose steps had all started ran to its end ("no"), and one
    of which no more was scheduled after the step in flight at the abort was stopped ("yes", at a step boundary).
    Read only where the cancelled request had the engine to itself (nothing else in flight on the client's clock)."""
    if ev.steps is None or c.get("t_first_token") is not None or c.get("t_sent") is None:
        return None
    t0, t1 = c["t_sent"], c["t_done"]
    for r in lines:
        if r is c or r is n or r.get("t_sent") is None:
            continue
        if r["t_sent"] < t1 and (r.get("t_done") or float("inf")) > t0:
            return None  # another request shared the engine's steps with it
    prompt = c.get("prompt_tokens") or c.get("planned_prompt_tokens")
    got = cancel_steps(ev.steps, c["request_id"], prompt, n["request_id"] if n is not None else None)
    if got is None:
        return None
    figures: Figures = {
        "prompt_tokens": got.prompt_tokens,
        "computed_tokens": got.computed_tokens,
        # the counts of the steps started before its abort line, and of the two after it, in the log's order
        "steps_before_abort": ", ".join(map(str, got.before_abort)) or "none",
        "steps_after_abort": ", ".join(map(str, got.after_abort)) or "none",
        "settled_by": got.settled_by,
    }
    stopped = got.stopped_at
    if stopped is not None:
        figures["stop_after_cancel_s"] = max(0.0, stopped - c["t_done"])  # read times: up to a poll late
    if got.ran_to_end or got.ran_on_after_abort:
        why = f"{STEPS_WORDS}: {got.settled_by}"
        return CancelSample(NO, STEPS, figures, granularity="only at the end", why=why, engine_stopped=stopped)
    gran = "before it started" if got.computed_tokens == 0 else "at a batch boundary"
    return CancelSample(YES, STEPS, figures, granularity=gran, engine_stopped=stopped if stopped else c["t_done"])


def _never_started(c: Line, n: Line | None, splits: dict[str, TtftSplit], ev: ServerEvidence) -> CancelSample | None:
    """A cancelled request the server never launched: the cancel was honoured before any of its prefill ran."""
    if not ev.events("launch") or c.get("t_sent") is None or c.get("t_first_token") is not None:
        return None
    t_c = c["t_done"]
    taken = {s.task for s in splits.values() if s.task is not None}
    if any(e.task not in taken for e in ev.events("launch", c["t_sent"] - 0.02, t_c + LOG_SLACK_S)):
        return None  # a launch in its window that no request claimed could be this one's
    out = CancelSample(
        YES,
        "log",
        granularity="before it started",
        engine_stopped=t_c,
        figures={
            "stop_after_cancel_s": 0.0,
            "stopped_at_tokens": 0,
            "prompt_tokens": c.get("planned_prompt_tokens") or c.get("prompt_tokens"),
            "log_line": "no `processing task` line while it was in flight",
        },
    )
    out.judge_next(_next_delay(n, t_c, t_c, splits, ev))
    return out


def _cancel_from_serial_log(
    c: Line, ev: ServerEvidence, left: float | None, alone: float | None
) -> CancelSample | None:
    """On a one-at-a-time server that logs when it starts each request (llama-cpp-python), the engine was busy
    with the cancelled request until it started the next one: that start, against the prefill left, says whether
    the cancel stopped it. An abort needs both a start well inside the prefill left and a time on the cancelled
    request well under its prefill alone (`SERVED_SHORT`): one without the other is "can't tell"."""
    begins = ev.events("begin")
    prompt = c.get("planned_prompt_tokens") or c.get("prompt_tokens")
    if not begins or not prompt or left is None or left <= 0 or not alone:
        return None
    t_c = c["t_done"]
    own = [
        b
        for b in begins
        if c["t_sent"] - LOG_SLACK_S <= b.t <= t_c + LOG_SLACK_S
        and b.n_tokens is not None
        and abs(b.n_tokens - prompt) <= 0.03 * prompt
    ]
    if not own:
        return None
    after = [b for b in begins if b.t > own[0].t]
    if not after:
        return None
    busy = max(0.0, after[0].t - t_c)
    # The log says when the server began the cancelled request: the prefill left counts from there.
    left = alone - (t_c - own[0].t)
    if left <= 0:
        return None
    served = after[0].t - own[0].t
    figures: Figures = {
        "next_start_after_cancel_s": busy,
        "prefill_left_s": left,
        "served_s": served,
        "prefill_alone_s": alone,
        "prompt_tokens": prompt,
        "log_line": excerpt(after[0].line.strip(), 160, one_line=False),
    }
    if busy >= RAN_ON_SERIAL * left:
        return CancelSample(
            NO,
            "log",
            figures,
            granularity="only at the end",
            engine_stopped=after[0].t,
            why=f"the server (one request at a time) started the next request {busy:.3g} s after "
            f"the cancel, with {left:.3g} s of the cancelled prefill left: it ran on",
        )
    if busy < STARTED_EARLY * left and served < SERVED_SHORT * alone:
        return CancelSample(YES, "log", figures, granularity=CANT, engine_stopped=after[0].t)
    if busy < STARTED_EARLY * left:
        return CancelSample(
            CANT,
            "log",
            figures,
            why=f"the server started the next request {busy:.3g} s after the cancel, but only after {served:.3g} s "
            f"on the cancelled request ({served / alone:.0%} of its prefill alone): a prefill that ran to its end "
            "faster than alone looks the same",
            would_tell="a cancel earlier in the prefill (a longer --long-tokens), or a quieter host",
        )
    return None


def _next_delay(
    n: Line | None,
    t_c: float,
    t_stop: float | None,
    splits: dict[str, TtftSplit],
    ev: ServerEvidence,
    held_from: float | None = None,
) -> NextDelay | None:
    """What held the next request between the cancel and the server starting on it, in named parts."""
    if n is None:
        return None
    s = splits.get(n["request_id"])
    if s is None or not _server_side(s) or s.server_start is None:
        return NextDelay(
            "client",
            CANT,
            ttft_s=n.get("ttft_s"),
            would_tell="the server's timings (prompt_ms) or its log (--server-log)",
        )
    start = s.server_start
    launched = s.launched if s.launched is not None else start
    t0 = max(n["t_sent"], t_c)
    parts: dict[str, float] = {}

    def add(name: str, a: float, b: float) -> None:
        if b > a:
            parts[name] = parts.get(name, 0.0) + b - a

    # Until its launch it waited for a free slot (or the engine); after it, in its slot for a step with room.
    stop = t_stop if t_stop is not None else t0
    # `held_from`: the cancelled request was launched only after the cancel; prompt-cache lines since it was sent
    # say the engine was storing that slot's old prompt, not prefilling it.
    before = (
        CANCELLED_CACHE_STORE
        if held_from is not None and ev.events("cache", held_from, stop)
        else CANCELLED_BEFORE_LAUNCH
    )
    add(before, t0, min(stop, launched))
    add(CANCELLED_IN_SLOT, max(t0, launched), min(stop, start))
    rest_from = max(t0, min(stop, start))
    rest = max(0.0, start - rest_from)
    if rest > 0.01:
        if ev.events("idle_save", rest_from - 0.05, start + 0.05):
            name = IDLE_SAVE
        elif ev.events("cache", rest_from - 0.05, start + 0.05):
            name = CACHE_STORE
        else:
            name = UNATTRIBUTED
        parts[name] = rest
    cause = (
        WORDS[max(parts, key=parts.__getitem__)] if parts and max(parts.values()) > 0 else "nothing (started at once)"
    )
    return NextDelay(
        s.evidence,
        cause,
        parts_s=parts,
        wait_s=start - n["t_sent"],
        prefill_s=s.prefill_s,
        would_tell=_unattributed_advice(s.evidence) if UNATTRIBUTED in parts else None,
    )


def _unattributed_advice(evidence: str) -> str:
    """What would name a silent wait: the engine's log for a split from /metrics alone (vLLM, SGLang); llama.cpp's
    trace log for one from llama.cpp's own timings or log ("timings", "log", "timings+log")."""
    return ENGINE_LOG if evidence == "metrics" else SILENT_WOULD_TELL


def _tokens_left(c: Line, left: float | None, facts: _Facts) -> float | None:
    """The prompt tokens the cancelled request still had to prefill at the cancel, where the run says."""
    if left is None:
        return None
    if facts.prefill_tok_s:
        return max(0.0, left) * facts.prefill_tok_s
    prompt: int | None = c.get("planned_prompt_tokens") or c.get("prompt_tokens")
    if prompt and facts.prefill_alone:
        return max(0.0, left) / facts.prefill_alone * prompt
    return None


def _unless_last_step(got: CancelSample, c: Line, left: float | None, facts: _Facts) -> CancelSample:
    """A "no" whose cancel landed in the prefill's last step is "can't tell": the next step boundary was the end."""
    tokens = _tokens_left(c, left, facts)
    if got.verdict != NO or tokens is None or tokens > LAST_STEP_TOKENS:
        return got
    return CancelSample(
        CANT,
        got.evidence,
        {**got.figures, "prefill_tokens_left_est": round(tokens)},
        next_judged=got.next_judged,
        next_delay=got.next_delay,
        engine_stopped=got.engine_stopped,
        why=f"the cancel landed in the prefill's last step (about {round(tokens)} tokens left, a step may be "
        f"{LAST_STEP_TOKENS}): a server that stops at the next step boundary ends there too",
        would_tell="a longer long prompt (--long-tokens), so that the cancel lands steps before the prefill's end",
    )


def _left(c: Line, splits: dict[str, TtftSplit], facts: _Facts) -> float | None:
    """The prefill the cancelled request still had when it was cancelled (from the same prompt's prefill alone)."""
    if facts.prefill_alone is None:
        return None
    s = splits.get(c["request_id"])
    start: float = s.server_start if s is not None and s.server_start is not None else c["t_sent"]
    done: float = c["t_done"]
    return facts.prefill_alone - (done - start)


def _cancel_from_gauges(c: Line, lines: list[Line], ev: ServerEvidence, left: float | None) -> CancelSample | None:
    """The first scrape after the cancel whose running+waiting no longer exceeds the client's own requests in flight."""
    if not ev.has_gauges or left is None or left <= 0:
        return None
    t_c = c["t_done"]

    def inflight(t: float) -> int:
        return sum(
            1
            for r in lines
            if r is not c and r.get("t_sent") is not None and r["t_sent"] <= t and (r.get("t_done") or float("inf")) > t
        )

    def on_its_way(t: float) -> bool:
        # a request the client sent just before the scrape may not have reached the server's count yet: the client
        # counts it in flight and the server does not, so the cancelled request would read "gone" while the engine
        # still runs it (seen: the before build's un-aborted prefill read gone 2.5 ms after the cancel, with the next
        # request, sent at the cancel, still on its way). Such a scrape is not read either way.
        return any(r is not c and r.get("t_sent") is not None and t - SENT_SETTLE_S < r["t_sent"] <= t for r in lines)

    # A gauge is the server's state as its last engine step ended (vLLM's are): a scrape during one long prefill
    # step reads what it read before the step, 0 on an idle server. Only gauges that counted this request while it
    # ran, before the cancel, show the engine's state changing around it; a reading of "gone" from gauges that
    # never saw it says nothing about whether the step it was in ran on. A reading of "still there" after the
    # cancel (FastLLM's decode lines counting it) is evidence either way.
    saw_it = any(
        c["t_sent"] <= g.t < t_c and g.running + g.waiting > inflight(g.t) for g in ev.gauges if c.get("t_sent")
    )
    still_at, gone_at, source = None, None, "metrics"
    for g in ev.gauges:
        if g.t < t_c or on_its_way(g.t):
            continue
        if g.running + g.waiting > inflight(g.t):
            still_at, source = g.t, g.source
        else:
            gone_at = g.t
            break
    if gone_at is None or (not saw_it and still_at is None):
        return None
    figures: Figures = {
        "gone_by_s": gone_at - t_c,
        "still_counted_at_s": None if still_at is None else still_at - t_c,
        "prefill_left_s": left,
    }
    if source == "log":  # FastLLM's `[Decode] alive = N, pending = M` lines
        figures["gauge_source"] = "log: [Decode] alive / pending"
    if saw_it and gone_at - t_c < STARTED_EARLY * left:
        return CancelSample(YES, source, figures, granularity=CANT, engine_stopped=gone_at)
    if still_at is not None and still_at - t_c >= RAN_ON * left:
        return CancelSample(NO, source, figures, granularity="only at the end", engine_stopped=still_at)
    return None


def _cancel_from_next(c: Line, n: Line, splits: dict[str, TtftSplit], facts: _Facts, left: float) -> CancelSample:
    """Judged from the next request alone: when it started and whether it decoded at its speed alone."""
    s = splits[n["request_id"]]
    server = _server_side(s) and s.before_start_s is not None
    timed = _decode_timed(n)
    alone = facts.short_decode_client
    client_slowed = 1 / n["decode_tok_s"] / alone if timed and n.get("decode_tok_s") and alone else None
    if server:
        wait, alone_tok = s.before_start_s, facts.short_decode_server
        per_tok = s.decode_s_per_token if timed else None
        # without the server's decode figures, the client's clock for both
        slowed = per_tok / alone_tok if per_tok and alone_tok else client_slowed
    else:
        wait, slowed = n["ttft_s"] - (facts.short_ttft or 0.0), client_slowed
    figures: Figures = {"next_wait_s": wait, "prefill_left_s": left, "next_decode_vs_alone": slowed}
    evidence = s.evidence if server else "client"
    if wait is not None and wait <= STARTED_EARLY * left and slowed is not None and slowed <= DECODE_SLOWED:
        return CancelSample(
            YES,
            evidence,
            figures,
            granularity=CANT,
            why=f"the next request started {wait:.3g} s after the cancel, with {left:.3g} s of "
            "prefill left, and decoded at its speed alone: the engine was not still prefilling",
        )
    if wait is not None and wait <= STARTED_EARLY * left and slowed is None:
        tokens = n.get("completion_tokens")
        return CancelSample(
            CANT,
            evidence,
            figures,
            why=f"the next request started {wait:.3g} s after the cancel, with {left:.3g} s of prefill left, but a "
            "server that serves two at once starts it beside a prefill that runs on, and its reply "
            f"({tokens if tokens is not None else 'no'} tokens) is too short to time its decode against a short's "
            "alone",
            would_tell=f"{CANCEL_LOG}, or /metrics request gauges scraped while the cancelled request ran",
        )
    hk = facts.wait_after_long
    if server and wait is not None and wait >= RAN_ON * left and hk is not None and hk <= 0.1 * left:
        figures["wait_after_a_long_request_s"] = hk
        return CancelSample(
            NO,
            evidence,
            figures,
            granularity="only at the end",
            why=f"the next request waited {wait:.3g} s before the server started on it, the "
            f"{left:.3g} s of prefill left, while after a finished long request it waited only "
            f"{hk:.3g} s",
        )
    if server and wait is not None and wait >= RAN_ON * left:
        return CancelSample(
            CANT,
            evidence,
            figures,
            why=f"the next request waited {wait:.3g} s before the server started on it ({evidence}), about the "
            f"{left:.3g} s of prefill left: the cancelled prefill ran on, or other work held the server as long, and "
            "no wait after a finished long request (alone in its /metrics window) says which",
            would_tell=f"{CANCEL_LOG}, or a longer long prompt (--long-tokens) so the cancel lands steps before the "
            "prefill's end",
        )
    return CancelSample(
        CANT,
        evidence,
        figures,
        why="the next request's wait could be the cancelled prefill running on or other work "
        "(housekeeping), and its decode does not say which",
        would_tell=f"{CANCEL_LOG}, or /metrics request gauges that change within an engine step (vLLM's change only "
        "as a step ends)",
    )


def judge_cancel(lines: list[Line], splits: dict[str, TtftSplit], ev: ServerEvidence, facts: _Facts) -> CancelVerdict:
    """Did the engine stop working on a cancelled long request, how soon, and what else delayed the next one."""
    nexts = {r["cycle"]: r for r in _ok(lines, "cancel_then_short", "short")}
    samples: list[CancelSample] = []
    for c in lines:
        if (
            c.get("scenario") != "cancel_then_short"
            or c.get("role") != "long"
            or c.get("interrupted")
            or c.get("t_done") is None
        ):
            continue
        if c.get("not_exercised"):  # no cancel was sent: nothing to say about what a cancel does
            samples.append(
                CancelSample(
                    NOT_EXERCISED,
                    "client",
                    {},
                    cycle=c["cycle"],
                    request_id=c["request_id"],
                    why=c["not_exercised"],
                    would_tell=LONGER_PROMPT,
                )
            )
            continue
        n = nexts.get(c["cycle"])
        if n is not None and n.get("not_exercised"):
            n = None
        left = _left(c, splits, facts)
        got = None if facts.from_cache else _cancel_from_steps(c, n, lines, ev)
        if got is not None:
            # exact: the step lines say how much of the prompt ran, whatever step it landed in
            got.judge_next(_next_delay(n, c["t_done"], got.engine_stopped, splits, ev))
            got.cycle, got.request_id = c["cycle"], c["request_id"]
            samples.append(got)
            continue
        got = _cancel_from_log(c, n, splits, ev, facts) if ev.has_log else None
        if got is None:
            got = _cancel_from_serial_log(c, ev, left, facts.prefill_alone) or _cancel_from_gauges(c, lines, ev, left)
            if got is not None:
                got.judge_next(_next_delay(n, c["t_done"], got.engine_stopped, splits, ev))
        if got is None and c.get("t_first_token") is not None:
            got = CancelSample(
                CANT,
                "client",
                {},
                why="cancelled after its first token: the prefill was over",
                would_tell="a longer long prompt (--long-tokens) so the cancel lands inside its "
                "prefill, or the server's log (--server-log) if it shows scheduling",
            )
        if got is None and n is not None and left is not None and left > 0:
            got = _cancel_from_next(c, n, splits, facts, left)
            got.judge_next(_next_delay(n, c["t_done"], None, splits, ev))
        if got is None:
            got = CancelSample(
                CANT,
                "client",
                {"prefill_left_s": left},
                why="no next request, or the cancel came after the prefill alone would have ended",
                would_tell="the server's log (--server-log)",
            )
        got = _unless_last_step(got, c, left, facts)
        got.cycle, got.request_id = c["cycle"], c["request_id"]
        samples.append(got)
    if not samples:
        return CancelVerdict(
            CANT,
            None,
            "client",
            [],
            why="no cancelled request in the run",
            would_tell="a run with the cancel_then_short scenario",
        )
    verdict = _vote([s.verdict for s in samples])
    settled = [s for s in samples if s.verdict == verdict]
    grans = {s.granularity for s in settled if s.granularity not in (None, CANT)}
    delays = [s.figures.get("stop_after_cancel_s") for s in settled]
    causes = [s.next_delay.cause for s in samples if s.next_delay is not None]
    why = would_tell = None
    if verdict in (CANT, NOT_EXERCISED):
        first = next((x for x in samples if x.verdict == verdict), samples[0])
        why = first.why or ""
        if verdict == NOT_EXERCISED:
            why = f"{why} ({len(samples)} of {len(samples)} cycles)"
        would_tell = first.would_tell or "the server's log (--server-log)"
        if facts.from_cache:  # the cache also makes the long prefill alone, the reference, too short
            why, would_tell = f"{why}; {facts.from_cache}", FRESH_PROMPTS
    return CancelVerdict(
        verdict,
        None if verdict == CANT else verdict == YES,
        _best([s.evidence for s in settled]) if settled else "client",
        samples,
        granularity=grans.pop() if len(grans) == 1 else (CANT if not grans else "mixed"),
        stop_after_cancel_s_max=max([d for d in delays if isinstance(d, (int, float))], default=None),
        judged_cycles=sum(s.verdict not in (CANT, NOT_EXERCISED) for s in samples),
        not_exercised_cycles=sum(s.verdict == NOT_EXERCISED for s in samples),
        next_delay_cause=max(set(causes), key=causes.count) if causes else None,
        why=why,
        would_tell=would_tell,
    )


# -- head-of-line -------------------------------------------------------------------------------------------------
def _short_from_steps(
    s: Line, long: Line, scen_lines: list[Line], ev: ServerEvidence, facts: _Facts, left: float
) -> HeadOfLineSample | None:
    """vLLM's step log (at DEBUG): did the short's prompt enter a step before the long prompt's last chunk?"""
    if ev.steps is None or facts.from_cache:
        return None
    shorts = [
        r["request_id"]
        for r in scen_lines
        if r.get("role") == "short" and r.get("cycle") == s["cycle"] and r.get("request_id")
    ]
    prompt = long.get("prompt_tokens") or long.get("planned_prompt_tokens")
    got = short_steps(ev.steps, long["request_id"], prompt, s["request_id"], shorts)
    if got is None:
        return None
    fig = HeadOfLineFigures(
        s["ttft_s"],
        left,
        steps={
            "long_prompt_tokens": got.long_tokens,
            "short_prompt_tokens": got.short_tokens,
            "long_chunks_before_tokens": list(got.long_chunks_before),
            "short_step_tokens": got.short_step_tokens,
            "settled_by": got.settled_by,
        },
    )
    cause = "the long request's prefill steps" if got.blocked else None
    return HeadOfLineSample(YES if got.blocked else NO, STEPS, cause, fig, s["request_id"])


def judge_head_of_line(
    lines: list[Line], splits: dict[str, TtftSplit], ev: ServerEvidence, facts: _Facts
) -> HeadOfLineVerdict:
    """Did an inserted short request wait for another request's prefill, or for something else (named)?"""
    samples: list[HeadOfLineSample] = []
    for scen in ("short_insert", "double_insert"):
        longs = {r["cycle"]: r for r in _ok(lines, scen, "long")}
        scen_lines = [r for r in lines if r.get("scenario") == scen]
        for s in _ok(lines, scen, "short"):
            long = longs.get(s["cycle"])
            if long is None or s.get("not_exercised"):
                continue
            left = long["t_first_token"] - s["t_sent"]
            if left <= 0:
                continue
            sp = splits[s["request_id"]]
            rid = s["request_id"]
            by_steps = _short_from_steps(s, long, scen_lines, ev, facts, left)
            if by_steps is not None:
                samples.append(by_steps)
                continue
            if _server_side(sp) and sp.server_start is not None:
                # server_start is when its own prompt entered a step: a request launched with the long one into
                # the other slot, whose first token came in the long prefill's last step, waited for all of it.
                blocked = sp.server_start >= long["t_first_token"] - 0.1 * left
                others = [held(o, splits, ev) for o in scen_lines if o is not s and o["cycle"] == s["cycle"]]
                parts = attribute(s, sp.server_start, others, splits, ev) if blocked else {}
                fig = HeadOfLineFigures(
                    s["ttft_s"],
                    left,
                    wait_before_start_s=sp.server_start - s["t_sent"],
                    in_launched_slot_s=sp.in_slot_s or None,
                    wait_parts_s=parts,
                )
                samples.append(HeadOfLineSample(YES if blocked else NO, sp.evidence, cause_words(parts), fig, rid))
                continue
            fig = HeadOfLineFigures(s["ttft_s"], left)
            if s["t_first_token"] < long["t_first_token"] - 0.1 * left:
                samples.append(HeadOfLineSample(NO, "client", None, fig, rid))
            elif facts.short_ttft is not None and s["ttft_s"] - facts.short_ttft >= 0.9 * left:
                samples.append(HeadOfLineSample(YES, "client", CANT, fig, rid))
            else:
                samples.append(HeadOfLineSample(CANT, "client", None, fig, rid))
    if not samples:
        missed = [
            r
            for r in lines
            if r.get("scenario") in ("short_insert", "double_insert")
            and r.get("role") == "short"
            and r.get("not_exercised")
        ]
        if missed:
            why: str | None = (
                f"none of {len(missed)} inserted short requests landed inside a long prefill: "
                f"{missed[0]['not_exercised']}"
            )
            return HeadOfLineVerdict(
                NOT_EXERCISED,
                None,
                "client",
                [],
                why=f"{why}; {facts.from_cache}" if facts.from_cache else why,
                would_tell=FRESH_PROMPTS if facts.from_cache else LONGER_PROMPT,
            )
        return HeadOfLineVerdict(
            CANT,
            None,
            "client",
            [],
            why="no inserted short request was sent during a long prefill",
            would_tell="a run with the short_insert or double_insert scenario",
        )
    verdict = _vote([x.verdict for x in samples])
    if verdict == NO and facts.from_cache:
        # The long prompts came from the prefix cache: their "prefill" was a cache hit of milliseconds, so a short
        # request that did not wait for it says nothing of a prefill it would have waited for.
        return HeadOfLineVerdict(
            CANT,
            None,
            _best([x.evidence for x in samples]),
            samples,
            judged=0,
            wait_fraction_p50=median([x.figures.ttft_s / x.figures.long_prefill_left_s for x in samples]),
            why=f"no inserted short request waited, but there was no real prefill to wait for; {facts.from_cache}",
            would_tell=FRESH_PROMPTS,
        )
    settled = [x for x in samples if x.verdict == verdict]
    causes = [x.cause for x in settled if x.cause]
    cause = max(set(causes), key=causes.count) if causes else None
    why = would_tell = None
    if verdict == YES and cause == CANT:
        would_tell = "the server's timings (prompt_ms) or its log, to say what the wait was spent on"
    if verdict == CANT:
        why = "the client alone cannot tell when the server started on the short requests"
        would_tell = "the server's timings (prompt_ms), its log (--server-log) or /metrics"
        if facts.from_cache:
            why, would_tell = f"{why}; {facts.from_cache}", FRESH_PROMPTS
    return HeadOfLineVerdict(
        verdict,
        None if verdict == CANT else verdict == YES,
        _best([x.evidence for x in settled]) if settled else "client",
        samples,
        cause=cause,
        blocked=sum(x.verdict == YES for x in samples),
        judged=sum(x.verdict != CANT for x in samples),
        wait_fraction_p50=median([x.figures.ttft_s / x.figures.long_prefill_left_s for x in samples]),
        why=why,
        would_tell=would_tell,
    )


# -- long request hurt by inserts ---------------------------------------------------------------------------------
def judge_long_hurt(lines: list[Line], splits: dict[str, TtftSplit], facts: _Facts) -> LongHurtVerdict:
    """Is the long request's own prefill slower with inserted shorts than alone (not its time to first token)?"""
    with_ins = [
        r for s in ("short_insert", "double_insert") for r in _ok(lines, s, "long") if not r.get("not_exercised")
    ]
    server = [splits[r["request_id"]] for r in with_ins if _server_side(splits.get(r["request_id"]))]
    ttft_ratio = None
    ttft_with = median([r["ttft_s"] for r in with_ins])
    if ttft_with is not None and facts.prefill_alone_client:
        ttft_ratio = ttft_with / facts.prefill_alone_client
    prefill_with = median([s.prefill_s for s in server])
    if prefill_with is None or not facts.prefill_alone_server:
        return LongHurtVerdict(
            CANT,
            None,
            "client",
            None,
            {"ttft_ratio_p50": ttft_ratio},
            why="its time to first token also holds any wait before its prefill started",
            would_tell="the server's timings (prompt_ms) or its prefill-time histogram in /metrics",
        )
    ratio = prefill_with / facts.prefill_alone_server
    verdict = YES if ratio > HURT_RATIO else NO
    return LongHurtVerdict(
        verdict,
        verdict == YES,
        _best([s.evidence for s in server]),
        ratio,
        {
            "prefill_with_inserts_s_p50": prefill_with,
            "prefill_alone_s_p50": facts.prefill_alone_server,
            "ttft_ratio_p50": ttft_ratio,
            "wait_before_prefill_with_inserts_s_p50": median([s.before_start_s for s in server]),
        },
    )


# -- concurrency --------------------------------------------------------------------------------------------------
def judge_concurrency(metrics: dict[str, Any]) -> ConcurrencyVerdict:
    """Measured figures only: each stream alone and together, the combined rate, effective concurrency."""

    def p50(name: str) -> float | None:
        return (metrics.get(name) or {}).get("p50")

    eff = p50("effective_concurrency")
    figures = ConcurrencyFigures(
        p50("gen_alone_tok_s"),
        p50("concurrent_stream_tok_s"),
        p50("concurrent_combined_tok_s"),
        eff,
        p50("concurrency_speedup"),
    )
    verdict = CANT if eff is None else YES if eff >= TOGETHER else NO if eff <= TOOK_TURNS else CANT
    return ConcurrencyVerdict(
        verdict,
        "client",
        figures,
        would_tell="two generations that both ran (and overlapped fully or not at all)" if verdict == CANT else None,
    )


def from_cache(ev: ServerEvidence) -> str | None:
    """Words saying the server's prefix cache served the run's prompts (its own counters), or None."""
    got = hit_rate([{"ok": True, **s} for s in ev.scrapes])
    if got is None or got["hit_rate"] is None or got["hit_rate"] < WARM_CACHE:
        return None
    return (
        f"the long prompts came from the server's prefix cache ({got['cached_tokens']} of {got['prompt_tokens']} "
        f"prompt tokens by {got['source']}): a warm server, not a short prefill"
    )


def diagnose(metrics: dict[str, Any], lines: list[Line], evidence: ServerEvidence | None = None) -> Diagnosis:
    """Every verdict with its evidence and figures, plus the per-request TTFT splits they rest on."""
    ev = evidence or ServerEvidence()
    splits = split_all(lines, ev)
    facts = _Facts(lines, splits)
    facts.from_cache = from_cache(ev)
    conc = judge_concurrency(metrics)
    apart = [r for r in lines if r.get("role") == "gen_pair" and r.get("not_exercised")]
    if conc.verdict == CANT and conc.figures.effective_concurrency is None and apart:
        conc = replace(
            conc,
            verdict=NOT_EXERCISED,
            why=apart[0]["not_exercised"],
            would_tell="two generations sent together that both run (a server that answers both)",
        )
    eff = conc.figures.effective_concurrency
    counts: dict[str, int] = {}
    for s in splits.values():
        counts[s.evidence] = counts.get(s.evidence, 0) + 1
    return Diagnosis(
        effective_concurrency=None if eff is None else max(1, round(eff)),
        effective_concurrency_raw=eff,
        concurrency_speedup=conc.figures.concurrency_speedup,
        concurrency=conc,
        head_of_line_blocking=judge_head_of_line(lines, splits, ev, facts),
        cancel_aborts=judge_cancel(lines, splits, ev, facts),
        long_hurt_by_inserts=judge_long_hurt(lines, splits, facts),
        silent_gaps=silent_gaps(lines, splits, ev),
        split_evidence=counts,
        ttft_split=list(splits.values()),
    )


def _ev(name: Any) -> str:
    return STEPS_WORDS if name == STEPS else str(name)


def _f(x: Any) -> str:
    return "-" if x is None else f"{x:.3g}" if isinstance(x, float) else str(x)


def diagnosis_lines(d: dict[str, Any], metrics: dict[str, Any]) -> list[str]:
    """One plain sentence per verdict, for the terminal: the answer, the figures, the evidence."""
    out = []
    conc = d.get("concurrency") or {}
    f = conc.get("figures") or {}
    if d.get("effective_concurrency") is not None:
        out.append(
            f"effective concurrency: {d['effective_concurrency']} ({_f(f.get('effective_concurrency'))} "
            f"streams at once; one stream alone {_f(f.get('gen_alone_tok_s'))} tok/s, each of two together "
            f"{_f(f.get('concurrent_stream_tok_s'))}, combined {_f(f.get('concurrent_combined_tok_s'))}; "
            f"evidence: {conc.get('evidence', 'client')})"
        )
    hol = d["head_of_line_blocking"]
    p95 = (metrics.get("short_insert_ttft_s") or {}).get("p95")
    if conc.get("verdict") == NOT_EXERCISED:
        out.append(f"two generations at once: not exercised ({conc.get('why')}; would tell: {conc.get('would_tell')})")
    if hol["verdict"] in (CANT, NOT_EXERCISED):
        out.append(
            f"head-of-line blocking: {hol['verdict']} ({hol.get('why', '')}; would tell: {hol.get('would_tell')})"
        )
    else:
        cause = f", waiting for {hol['cause']}" if hol.get("cause") and hol["cause"] != CANT else ""
        out.append(
            f"head-of-line blocking: {hol['verdict']} ({hol['blocked']} of {hol['judged']} inserted short "
            f"requests waited out the long prefill{cause}; short-insert TTFT p95 {_f(p95)} s; "
            f"evidence: {_ev(hol['evidence'])})"
        )
    ca = d["cancel_aborts"]
    if ca["verdict"] in (CANT, NOT_EXERCISED):
        out.append(
            f"cancel aborts the prefill: {ca['verdict']} ({ca.get('why', '')}; would tell: {ca.get('would_tell')})"
        )
    else:
        gran = f", {ca['granularity']}" if ca.get("granularity") not in (None, CANT) else ""
        stop = (
            f", engine stopped within {_f(ca['stop_after_cancel_s_max'])} s of the cancel"
            if ca.get("stop_after_cancel_s_max") is not None
            else ""
        )
        nxt = f"; the next request waited for {ca['next_delay_cause']}" if ca.get("next_delay_cause") else ""
        missed = f", {ca['not_exercised_cycles']} not exercised" if ca.get("not_exercised_cycles") else ""
        out.append(
            f"cancel aborts the prefill: {ca['verdict']}{gran}{stop}{nxt} "
            f"({ca['judged_cycles']} cycles{missed}; evidence: {_ev(ca['evidence'])})"
        )
    gaps = d.get("silent_gaps") or []
    if gaps:
        named = sorted({g["cause"] for g in gaps})
        tell = next((g["would_tell"] for g in gaps if g.get("would_tell")), None)
        out.append(
            f"pauses between a launch and its prefill, nothing else running: {len(gaps)}, "
            f"{sum(g['gap_s'] for g in gaps):.3g} s in all (max {max(g['gap_s'] for g in gaps):.3g} s): "
            f"{', '.join(named)}" + (f" (would tell: {tell})" if tell else "")
        )
    hurt = d["long_hurt_by_inserts"]
    if hurt["verdict"] == CANT:
        out.append(
            f"long request hurt by inserts: can't tell (TTFT {_f(hurt['figures'].get('ttft_ratio_p50'))}x "
            f"alone, but {hurt['why']}; would tell: {hurt['would_tell']})"
        )
    else:
        fig = hurt["figures"]
        out.append(
            f"long request hurt by inserts: {hurt['verdict']} (its own prefill {hurt['ratio_p50']:.3f}x alone; "
            f"TTFT {_f(fig.get('ttft_ratio_p50'))}x; evidence: {hurt['evidence']})"
        )
    return out
