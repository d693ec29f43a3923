"""How the report writes a figure and a code name for a reader: numbers never in exponent form, evidence and wait
causes in words, and the list of identifiers that must never appear inside a sentence (tests scan for them)."""

from __future__ import annotations

import math
from typing import Any

from evalkit.evidence.vllm_steps import EVIDENCE as VLLM_STEPS
from evalkit.evidence.vllm_steps import EVIDENCE_WORDS as VLLM_STEPS_WORDS
from evalkit.evidence.wait_parts import CANCELLED_BEFORE_LAUNCH, UNATTRIBUTED, WORDS

# Where a verdict's evidence came from, as summary.json names it, in words.
EVIDENCE_WORDS = {
    VLLM_STEPS: VLLM_STEPS_WORDS,
    "timings+log": "the server's per-request timings and its log",
    "timings": "the server's per-request timings",
    "log": "the server's log",
    "metrics": "the server's /metrics",
    "client": "the client's clock alone",
}
# A wait part no server timing or log line accounts for has the identifier's own name as its words; say what it is.
_CAUSE_WORDS = {
    **WORDS,
    UNATTRIBUTED: "a wait no server timing or log line accounts for",
    CANCELLED_BEFORE_LAUNCH: "the cancelled request, until the engine stopped (before the next one was launched)",
    "cancelled_until_stopped": "the cancelled request, until the engine stopped",
}
# Identifiers that may stand beside a row as its metric key but never inside a verdict's sentence.
CODE_NAMES = (
    *(k for k in WORDS if "_" in k),
    UNATTRIBUTED,
    "timings+log",
    "None",
    "nan",
    "cant_tell",
    "not_exercised",
    "cancelled_until_stopped",
)


def num(v: Any, sig: int = 3, trim: bool = False) -> str:
    """A figure with `sig` significant digits, never in exponent form (2011.4 -> "2011", 0.00412 -> "0.00412");
    `trim` drops trailing zeros (12.0000 -> "12")."""
    if v is None:
        return "–"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        return "–"
    if v == 0:
        return "0"
    digits = max(0, sig - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{digits}f}"
    return text.rstrip("0").rstrip(".") if trim and "." in text else text


def seconds(v: Any) -> str:
    """Seconds for a sentence: "1.82 s", "0.040 s", "4.1 ms" below ten milliseconds."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return "–"
    if abs(v) < 0.01 and v != 0:
        return f"{num(v * 1000, 2)} ms"
    return f"{v:.2f} s" if abs(v) >= 0.1 else f"{v:.3f} s"


def evidence(name: Any) -> str:
    """A verdict's evidence in words."""
    return EVIDENCE_WORDS.get(str(name), str(name))


def cause(name: Any) -> str:
    """A wait's cause (identifier or the words an older run wrote) in words."""
    return _CAUSE_WORDS.get(str(name), str(name))


def time_scale_words(factor: float) -> str:
    """What a sped-up server's figures mean, naming the factor."""
    f = f"{factor:g}"
    return f"{f}× faster than real time (seconds are 1/{f} of real ones, tok/s {f} times real)"
