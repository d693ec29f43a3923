"""The keys of a `requests.jsonl` line that the evidence readers use (ttft_split, spec_decode, gpu_telemetry,
metrics_rates), as `evalkit.runs.records.RequestRecord.to_json` writes them with a command's labels after.
Every key is optional: lines of earlier versions, and of commands that label their requests otherwise, still read.
"""

from __future__ import annotations

from typing import TypedDict


class ServerTimings(TypedDict, total=False):
    """The llama.cpp `timings` of a request line (`server_timings`) that the evidence reads."""

    prompt_ms: float
    prompt_n: int
    cache_n: int
    predicted_ms: float
    predicted_n: int
    predicted_per_second: float
    draft_n: int
    draft_n_accepted: int


class RequestLineJson(TypedDict, total=False):
    """One `requests.jsonl` line, the keys the evidence reads: the client's times, the outcome, the server's
    timings, and bench's labels (`phase`, `prompt`)."""

    request_id: str
    t_sent: float
    t_first_token: float | None
    t_done: float | None
    t_last_token: float | None
    status: str
    completion_tokens: int | None
    ttft_s: float | None
    server_timings: ServerTimings | None
    phase: str
    prompt: str
