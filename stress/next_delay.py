"""What held the request sent after a cancel, between the cancel and the server starting on it, in named parts."""

from __future__ import annotations

from evalkit.evidence.server_evidence import ServerEvidence
from evalkit.evidence.ttft_split import TtftSplit
from evalkit.evidence.wait_parts import (
    CACHE_STORE,
    CANCELLED_BEFORE_LAUNCH,
    CANCELLED_CACHE_STORE,
    CANCELLED_IN_SLOT,
    IDLE_SAVE,
    SILENT_WOULD_TELL,
    UNATTRIBUTED,
    WORDS,
)
from evalkit.runs.rundir import Line
from evalkit_stress.diagnose_facts import server_side
from evalkit_stress.verdicts import CANT, NextDelay

# An unattributed wait on a server seen only through /metrics (vLLM, SGLang): llama.cpp's trace-log advice is no use.
ENGINE_LOG = (
    "the server's log with its request lines (--server-log; vLLM: --enable-log-requests, and VLLM_LOGGING_LEVEL=DEBUG "
    "for a line per engine step), to say what the engine ran in the wait"
)


def next_delay(
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
    if s is None or not server_side(s) or s.server_start is None:
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
        would_tell=unattributed_advice(s.evidence) if UNATTRIBUTED in parts else None,
    )


def unattributed_advice(evidence: str) -> str:
    """What would name a silent wait: the engine's log for a split from /metrics alone (vLLM, SGLang); llama.cpp's
    trace log for one from llama.cpp's own timings or log ("timings", "log", "timings+log")."""
    return ENGINE_LOG if evidence == "metrics" else SILENT_WOULD_TELL
