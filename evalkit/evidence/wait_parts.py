"""What a request's wait before its own prefill was spent on, from what the other requests were doing on the server.

The wait [sent, its prefill start] is walked in small steps: while another request of the run prefilled or decoded
it waited for that (before its launch: for a free slot or the engine; after it: in its launched slot, for another
request's steps); a stretch with nothing else running is housekeeping when a log line inside it says so
(llama.cpp's prompt-cache lines, its trace-level idle-slot save), else unattributed, never guessed. `silent_gaps`
lists the pauses between a launch and the request's own prefill with nothing else running, with the idle slots the
log shows and what would tell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

from evalkit.evidence.server_evidence import LogEvent, ServerEvidence
from evalkit.evidence.ttft_split import TtftSplit
from evalkit.runs.rundir import Line

# The parts a wait is split into: identifiers as the keys of `wait_parts_s` / `parts_s`, and the words a verdict's
# `cause` (and the report) names each by. Runs written before the keys were identifiers keyed them by the words.
OTHER_PREFILL, OTHER_DECODE = "other_prefill", "other_decode"
IN_SLOT_PREFILL, IN_SLOT_DECODE = "in_slot_prefill", "in_slot_decode"
HOUSEKEEPING, IDLE_SAVE, UNATTRIBUTED = "housekeeping", "idle_save", "unattributed"
# The next request after a cancel (diagnose's `next_delay`): what held it until the server started on it.
CANCELLED_BEFORE_LAUNCH, CANCELLED_CACHE_STORE = "cancelled_before_launch", "cancelled_cache_store"
CANCELLED_IN_SLOT, CACHE_STORE = "cancelled_in_slot", "cache_store"
WORDS = {
    OTHER_PREFILL: "prefill of another request",
    OTHER_DECODE: "decode of another request",
    IN_SLOT_PREFILL: "another request's prefill steps, in a launched slot",
    IN_SLOT_DECODE: "another request's decode steps, in a launched slot",
    HOUSEKEEPING: "housekeeping (log: prompt cache)",
    IDLE_SAVE: "idle-slot save (log: saving idle slot to prompt cache)",
    UNATTRIBUTED: "unattributed",
    CANCELLED_BEFORE_LAUNCH: "before its launch: the cancelled request, until the engine stopped",
    CANCELLED_CACHE_STORE: "the server's prompt-cache store for the cancelled request's slot (log: prompt cache lines)",
    CANCELLED_IN_SLOT: "the cancelled request's steps, in a launched slot, until the engine stopped",
    CACHE_STORE: "the server's prompt-cache store (log: prompt cache lines)",
}
# Runs older still named the next request's whole wait until the engine stopped in one part.
_PART_OF_WORDS = {
    **{w: k for k, w in WORDS.items()},
    "the cancelled request, until the engine stopped": "cancelled_until_stopped",
}
SILENT_MIN_S = 0.1  # a pause shorter than this between a launch and its prefill is not listed
# What would name a silent pause on llama.cpp: its trace level, or the runs without its two silent stores.
SILENT_WOULD_TELL = (
    "llama.cpp's trace log (-lv 4: 'saving idle slot to prompt cache', 'updating prompt cache', "
    "'prompt cache update took N ms'), or the same run with --no-cache-idle-slots or --cache-ram 0"
)


class IdleSlotJson(TypedDict):
    """An `IdleSlot` as summary.json holds it."""

    slot: int
    n_tokens: int | None


class _SilentGapBase(TypedDict):
    request_id: str
    scenario: str | None
    role: str | None
    gap_s: float
    after: str
    cause: str
    idle_slots_at_launch: list[IdleSlotJson]


class SilentGapJson(_SilentGapBase, total=False):
    """A `SilentGap` as summary.json holds it, in the order written; `would_tell` only where something would."""

    would_tell: str


@dataclass(frozen=True)
class IdleSlot:
    """A slot idle at a moment and the prompt tokens it held (from the log)."""

    slot: int
    n_tokens: int | None

    def to_json(self) -> IdleSlotJson:
        """The record as summary.json holds it."""
        return {"slot": self.slot, "n_tokens": self.n_tokens}


@dataclass(frozen=True)
class SilentGap:
    """A pause between a request's launch and its own prefill with nothing else of the run on the server."""

    request_id: str
    scenario: str | None
    role: str | None
    gap_s: float
    cause: str  # in words (WORDS)
    idle_slots_at_launch: list[IdleSlot] = field(default_factory=list)
    after: str = "its launch (log: processing task)"
    would_tell: str | None = None

    def to_json(self) -> SilentGapJson:
        """The record as summary.json holds it."""
        out: SilentGapJson = {
            "request_id": self.request_id,
            "scenario": self.scenario,
            "role": self.role,
            "gap_s": self.gap_s,
            "after": self.after,
            "cause": self.cause,
            "idle_slots_at_launch": [s.to_json() for s in self.idle_slots_at_launch],
        }
        if self.would_tell is not None:
            out["would_tell"] = self.would_tell
        return out


def read_parts(parts: dict[str, float] | None) -> dict[str, float]:
    """A `wait_parts_s` / `parts_s` record as a run file holds it, keyed by identifiers (old runs: by the words)."""
    return {_PART_OF_WORDS.get(k, k): v for k, v in (parts or {}).items()}


def cause_words(parts: dict[str, float]) -> str | None:
    """The largest part, in words (a verdict's `cause`), or None when there are no parts."""
    return WORDS[max(parts, key=parts.__getitem__)] if parts else None


def _phase(o: Line, so: TtftSplit | None, t: float) -> str | None:
    """What another request was doing on the server at t: prefill, decode, gap (launched, not yet prefilling).
    A request cancelled in its prefill prefilled until its stop line (`engine_until`), not until the cancel."""
    ff = o.get("t_first_token") or o.get("engine_until") or o.get("t_done")
    if ff is None or o.get("t_sent") is None:
        return None
    start = so.server_start if so is not None and so.server_start is not None else o["t_sent"]
    launched = so.launched if so is not None and so.launched is not None else start
    if start <= t < ff:
        return "prefill"
    if o.get("t_done") is not None and ff <= t < o["t_done"] and o.get("t_first_token") is not None:
        return "decode"
    if launched <= t < start:
        return "gap"
    return None


def attribute(
    s: Line, start: float, others: list[Line], splits: dict[str, TtftSplit], ev: ServerEvidence
) -> dict[str, float]:
    """The wait [sent, start of its own prefill] split by what the other requests were doing on the server, and,
    once the server had launched it into a slot, as waiting there for another request's step."""
    t0 = s["t_sent"]
    own = splits.get(s["request_id"])
    launched = own.launched if own is not None and own.launched is not None else None
    parts = {OTHER_PREFILL: 0.0, OTHER_DECODE: 0.0, IN_SLOT_PREFILL: 0.0, IN_SLOT_DECODE: 0.0}
    # Walk the wait in small steps: simple and exact enough (1 ms), and phases of several requests may overlap.
    step = max(0.001, (start - t0) / 2000)
    t = t0
    silent = 0.0
    while t < start:
        mid = t + step / 2
        phases = {_phase(o, splits.get(o["request_id"]), mid) for o in others}
        busy = "prefill" if "prefill" in phases else "decode" if "decode" in phases else None
        if busy and launched is not None and mid >= launched:
            parts[IN_SLOT_PREFILL if busy == "prefill" else IN_SLOT_DECODE] += step
        elif busy:
            parts[OTHER_PREFILL if busy == "prefill" else OTHER_DECODE] += step
        else:
            silent += step
        t += step
    if silent > 0:
        if ev.events("idle_save", t0, start + 0.05):
            parts[IDLE_SAVE] = silent
        elif ev.events("cache", t0, start + 0.05):
            parts[HOUSEKEEPING] = silent
        else:
            parts[UNATTRIBUTED] = silent
    return {k: v for k, v in parts.items() if v > 0}


def _idle_slots(ev: ServerEvidence, t: float, busy_slot: int | None) -> list[IdleSlot]:
    """Slots idle at t and what they held, from the log: a slot whose last line before t was its release."""
    last: dict[int, LogEvent] = {}
    for e in ev.log:
        if e.t > t:
            break
        if e.slot is not None and e.kind in ("launch", "stop"):
            last[e.slot] = e
    return [
        IdleSlot(k, e.n_tokens) for k, e in sorted(last.items()) if e.kind == "stop" and k != busy_slot and e.n_tokens
    ]


def held(o: Line, splits: dict[str, TtftSplit], ev: ServerEvidence) -> Line:
    """A cancelled request with its task's stop line: the engine worked on it until then (`engine_until`)."""
    so = splits.get(o.get("request_id") or "")
    if o.get("t_first_token") is not None or so is None or so.task is None or o.get("t_done") is None:
        return o
    stops = [e for e in ev.events("stop", o["t_done"] - 0.05) if e.task == so.task]
    return {**o, "engine_until": stops[0].t} if stops else o


def silent_gaps(lines: list[Line], splits: dict[str, TtftSplit], ev: ServerEvidence) -> list[SilentGap]:
    """Pauses between a request's launch and its own prefill while no other request of the run was prefilling or
    decoding: named only from a log line inside the pause, otherwise unattributed, with what would tell."""
    out = []
    for r in lines:
        sp = splits.get(r.get("request_id") or "")
        if sp is None or not sp.in_slot_s or sp.launched is None or sp.server_start is None:
            continue
        others = [held(o, splits, ev) for o in lines if o is not r]
        part = attribute({**r, "t_sent": sp.launched}, sp.server_start, others, splits, ev)
        gap = sum(v for k, v in part.items() if k in (UNATTRIBUTED, HOUSEKEEPING, IDLE_SAVE))
        if gap < SILENT_MIN_S:
            continue
        named = next((k for k in (IDLE_SAVE, HOUSEKEEPING) if k in part), UNATTRIBUTED)
        out.append(
            SilentGap(
                r["request_id"],
                r.get("scenario"),
                r.get("role"),
                gap,
                WORDS[named],
                _idle_slots(ev, sp.launched, sp.slot),
                would_tell=SILENT_WOULD_TELL if named == UNATTRIBUTED else None,
            )
        )
    return out
