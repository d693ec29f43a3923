"""The sim's own record of one request, filled in as it moves through the engine: the ground truth.

This is the one mutable record in the sim, because it is written by the request handler and the engine over
the request's life; `/sim/events` serves snapshots of it. Times are epoch seconds from `evalkit.clock.Clock`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TypedDict, cast


@dataclass
class RequestTrace:
    """Ground truth of one chat request (`status` is `running` until it ends)."""

    request_id: str
    arrival_index: int
    arrived: float
    stream: bool
    prompt_tokens: int = 0
    max_tokens: int | None = None
    kind: str = "filler"
    question_id: str | None = None
    intended_correct: bool | None = None
    thinking: bool = False
    fault: str | None = None
    # When the engine took it in, at its first step boundary after arrival (vLLM's engine core reads new requests
    # only between steps): vLLM's queue time counts from here, its time to first token from `arrived`.
    engine_intake: float | None = None
    prefill_start: float | None = None
    prefill_done: float | None = None
    first_token: float | None = None
    # The first token after the reasoning (tags included) went to the socket, and how many reasoning tokens came
    # before it: the truth time-to-first-answer-token is checked against (streamed requests).
    first_answer_token: float | None = None
    reasoning_tokens: int = 0
    done: float | None = None
    cancelled: bool = False
    status: str = "running"  # running | ok | error | cancelled | disconnected | killed
    completion_tokens: int = 0
    finish_reason: str | None = None
    # When the engine stopped working on it (prefill cut, or run to its end) and how far its prefill had got:
    # for a cancelled request, the truth the cancel verdict is checked against.
    engine_stopped: float | None = None
    stopped_at_tokens: int | None = None
    # The engine storing this request's state after it ended (--housekeeping-s-per-token), doing nothing else.
    housekeeping_start: float | None = None
    housekeeping_end: float | None = None
    slot: int | None = None  # the slot id its log lines name (`task` is arrival_index)
    # When the engine launched it into a slot (its `processing task` line); with --step-tokens its prompt enters a
    # step (`prefill_start`) only when the step has room, so the two differ.
    launched: float | None = None
    # The idle-slot save its launch set off (--idle-slot-save-s-per-token): the engine did nothing else meanwhile.
    idle_save_start: float | None = None
    idle_save_end: float | None = None
    idle_save_tokens: int = 0
    draft_n: int = 0  # speculative decoding (--spec-accept): tokens drafted for it, and accepted
    draft_n_accepted: int = 0
    # The prefix cache (--prefix-cache-blocks): prompt tokens served from it (llama.cpp's `timings.cache_n`).
    cached_tokens: int = 0
    # What the sim received and answered, so a test can check a conversation's history against the sim's own
    # answers: sha256 of each message's role and content, and of the answer's content.
    message_digests: list[str] = field(default_factory=list)
    answer_digest: str | None = None

    def end(self, status: str, at: float) -> bool:
        """Mark the request ended (once); True when this call ended it."""
        if self.status != "running":
            return False
        self.status = status
        self.done = at
        self.cancelled = status == "cancelled"
        return True

    def to_json(self) -> SimEvent:
        """The event as `/sim/events` lists it."""
        return cast(SimEvent, asdict(self))


class SimEvent(TypedDict):
    """One `/sim/events` entry: a `RequestTrace` as JSON, its fields in their order (tests/test_sim_protocol.py
    holds the two to the same names)."""

    request_id: str
    arrival_index: int
    arrived: float
    stream: bool
    prompt_tokens: int
    max_tokens: int | None
    kind: str
    question_id: str | None
    intended_correct: bool | None
    thinking: bool
    fault: str | None
    engine_intake: float | None
    prefill_start: float | None
    prefill_done: float | None
    first_token: float | None
    first_answer_token: float | None
    reasoning_tokens: int
    done: float | None
    cancelled: bool
    status: str
    completion_tokens: int
    finish_reason: str | None
    engine_stopped: float | None
    stopped_at_tokens: int | None
    housekeeping_start: float | None
    housekeeping_end: float | None
    slot: int | None
    launched: float | None
    idle_save_start: float | None
    idle_save_end: float | None
    idle_save_tokens: int
    draft_n: int
    draft_n_accepted: int
    cached_tokens: int
    message_digests: list[str]
    answer_digest: str | None
