"""The head-of-line verdict: did an inserted short request wait for another request's prefill."""

from __future__ import annotations

from evalkit.evidence.server_evidence import ServerEvidence
from evalkit.evidence.ttft_split import TtftSplit
from evalkit.evidence.vllm_steps import EVIDENCE as STEPS
from evalkit.evidence.vllm_steps import short_steps
from evalkit.evidence.wait_parts import attribute, cause_words, held
from evalkit.runs.rundir import Line
from evalkit.stats import median
from evalkit_stress.diagnose_facts import (
    FRESH_PROMPTS,
    LONGER_PROMPT,
    Facts,
    best_evidence,
    ok_lines,
    server_side,
    vote,
)
from evalkit_stress.verdicts import CANT, NO, NOT_EXERCISED, YES, HeadOfLineFigures, HeadOfLineSample, HeadOfLineVerdict


# -- head-of-line -------------------------------------------------------------------------------------------------
def _short_from_steps(
    s: Line, long: Line, scen_lines: list[Line], ev: ServerEvidence, facts: Facts, left: float
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
    lines: list[Line], splits: dict[str, TtftSplit], ev: ServerEvidence, facts: Facts
) -> HeadOfLineVerdict:
    """Did an inserted short request wait for another request's prefill, or for something else (named)?"""
    samples: list[HeadOfLineSample] = []
    for scen in ("short_insert", "double_insert"):
        longs = {r["cycle"]: r for r in ok_lines(lines, scen, "long")}
        scen_lines = [r for r in lines if r.get("scenario") == scen]
        for s in ok_lines(lines, scen, "short"):
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
            if server_side(sp) and sp.server_start is not None:
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
    verdict = vote([x.verdict for x in samples])
    if verdict == NO and facts.from_cache:
        # The long prompts came from the prefix cache: their "prefill" was a cache hit of milliseconds, so a short
        # request that did not wait for it says nothing of a prefill it would have waited for.
        return HeadOfLineVerdict(
            CANT,
            None,
            best_evidence([x.evidence for x in samples]),
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
        best_evidence([x.evidence for x in settled]) if settled else "client",
        samples,
        cause=cause,
        blocked=sum(x.verdict == YES for x in samples),
        judged=sum(x.verdict != CANT for x in samples),
        wait_fraction_p50=median([x.figures.ttft_s / x.figures.long_prefill_left_s for x in samples]),
        why=why,
        would_tell=would_tell,
    )
