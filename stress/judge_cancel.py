"""The cancel verdict: did the engine stop working on a cancelled long request, and how soon. Read from the
server's log (llama.cpp's stop line, a one-at-a-time server's starts), vLLM's step log, request gauges, or the
next request alone."""

from __future__ import annotations

from evalkit.evidence.server_evidence import ServerEvidence
from evalkit.evidence.ttft_split import LOG_SLACK_S, TtftSplit
from evalkit.evidence.vllm_steps import EVIDENCE as STEPS
from evalkit.evidence.vllm_steps import EVIDENCE_WORDS as STEPS_WORDS
from evalkit.evidence.vllm_steps import cancel_steps
from evalkit.redact import excerpt
from evalkit.runs.rundir import Line
from evalkit_stress.diagnose_facts import (
    FRESH_PROMPTS,
    LONGER_PROMPT,
    Facts,
    best_evidence,
    decode_timed,
    ok_lines,
    server_side,
    vote,
)
from evalkit_stress.next_delay import next_delay
from evalkit_stress.verdict_json import Figures
from evalkit_stress.verdicts import CANT, NO, NOT_EXERCISED, YES, CancelSample, CancelVerdict

# What tells a cancel's fate, by server: llama.cpp logs the stop; vLLM logs the abort as its engine takes it in.
CANCEL_LOG = (
    "the server's log (--server-log: llama.cpp's 'stop processing' line after the cancel; vLLM's step log, with "
    "--enable-log-requests and VLLM_LOGGING_LEVEL=DEBUG: its 'Aborted request' line among the engine's steps)"
)

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

AT_ONCE_S = 0.06  # a stop logged this soon after the cancel is "at once" (the log is read every ~50 ms)
# A prefill step (a chunk, a batch) a server may finish before it looks at a cancel: llama.cpp's -b default, vLLM's
# chunked-prefill budget, the sim's --prefill-chunk. A cancel with no more than this left lands in the last step,
# where an engine that stops at step boundaries and one that runs on both end with the prompt (issue 39).
LAST_STEP_TOKENS = 2048


# -- cancel -------------------------------------------------------------------------------------------------------
def _cancel_from_log(
    c: Line, n: Line | None, splits: dict[str, TtftSplit], ev: ServerEvidence, facts: Facts
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
        out.judge_next(next_delay(n, t_c, stop.t, splits, ev, held_from=c["t_sent"]))
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
    out.judge_next(next_delay(n, t_c, stop.t, splits, ev))
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
    out.judge_next(next_delay(n, t_c, t_c, splits, ev))
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


def _tokens_left(c: Line, left: float | None, facts: Facts) -> float | None:
    """The prompt tokens the cancelled request still had to prefill at the cancel, where the run says."""
    if left is None:
        return None
    if facts.prefill_tok_s:
        return max(0.0, left) * facts.prefill_tok_s
    prompt: int | None = c.get("planned_prompt_tokens") or c.get("prompt_tokens")
    if prompt and facts.prefill_alone:
        return max(0.0, left) / facts.prefill_alone * prompt
    return None


def _unless_last_step(got: CancelSample, c: Line, left: float | None, facts: Facts) -> CancelSample:
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


def _left(c: Line, splits: dict[str, TtftSplit], facts: Facts) -> float | None:
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


def _cancel_from_next(c: Line, n: Line, splits: dict[str, TtftSplit], facts: Facts, left: float) -> CancelSample:
    """Judged from the next request alone: when it started and whether it decoded at its speed alone."""
    s = splits[n["request_id"]]
    server = server_side(s) and s.before_start_s is not None
    timed = decode_timed(n)
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


def judge_cancel(lines: list[Line], splits: dict[str, TtftSplit], ev: ServerEvidence, facts: Facts) -> CancelVerdict:
    """Did the engine stop working on a cancelled long request, how soon, and what else delayed the next one."""
    nexts = {r["cycle"]: r for r in ok_lines(lines, "cancel_then_short", "short")}
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
            got.judge_next(next_delay(n, c["t_done"], got.engine_stopped, splits, ev))
            got.cycle, got.request_id = c["cycle"], c["request_id"]
            samples.append(got)
            continue
        got = _cancel_from_log(c, n, splits, ev, facts) if ev.has_log else None
        if got is None:
            got = _cancel_from_serial_log(c, ev, left, facts.prefill_alone) or _cancel_from_gauges(c, lines, ev, left)
            if got is not None:
                got.judge_next(next_delay(n, c["t_done"], got.engine_stopped, splits, ev))
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
            got.judge_next(next_delay(n, c["t_done"], None, splits, ev))
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
    verdict = vote([s.verdict for s in samples])
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
        best_evidence([s.evidence for s in settled]) if settled else "client",
        samples,
        granularity=grans.pop() if len(grans) == 1 else (CANT if not grans else "mixed"),
        stop_after_cancel_s_max=max([d for d in delays if isinstance(d, (int, float))], default=None),
        judged_cycles=sum(s.verdict not in (CANT, NOT_EXERCISED) for s in samples),
        not_exercised_cycles=sum(s.verdict == NOT_EXERCISED for s in samples),
        next_delay_cause=max(set(causes), key=causes.count) if causes else None,
        why=why,
        would_tell=would_tell,
    )
