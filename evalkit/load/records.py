"""The JSON records of a load run, typed as they are written: a `requests.jsonl` line as the load workloads write
and read it, a distribution of samples, a target and a precision stop as recorded, and the manifest's `load`
(`LoadSettings`: what a workload's plan records of itself, and what a run of the same name must match).

TypedDicts: a record is a plain dict at run time, built in the order its file shows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast

from evalkit.runs.rundir import read_jsonl


class LoadLine(TypedDict, total=False):
    """One `requests.jsonl` line of a load run: the client's record (`RequestLine`: its figures and stamps) and the
    labels the load workloads add (a point's, a conversation's or a shared-prefix run's), as read back."""

    request_id: str
    status: str
    t_sent: float
    t_first_token: float | None
    t_done: float | None
    ttft_s: float | None
    ttft_answer_s: float | None
    e2e_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    answer_tokens: int | None
    chunk_times: list[float]
    server_timings: dict[str, float] | None
    error: str | None
    # the load runner's labels
    point: int
    mode: str
    load: float
    repeat: int
    index: int
    phase: str
    scheduled_send: float
    send_lateness_s: float | None
    cap_wait_s: float
    stage: int
    planned_prompt_tokens: int
    planned_output_tokens: int
    count_to: int
    client_host: int
    read_lag_s: float | None
    first_token_stamp_bound_s: float | None
    # a chat turn's labels (evalkit.load.turns)
    workload: str
    user: int
    turn: int
    session: str
    run: str
    group: int
    messages: int
    cache_n: int | None
    answer_digest: str
    # the verdict on the answer
    outcome: str
    error_kind: str | None
    extracted: str | None


class TurnLabels(TypedDict, total=False):
    """The labels a chat turn's line carries (`evalkit.load.turns.TurnSender.send`): its workload, and the user,
    turn, session, shared-prefix run and group it belongs to, and its index."""

    workload: str
    user: int
    turn: int
    session: str
    run: str
    group: int
    index: int


def read_lines(path: Path) -> list[LoadLine]:
    """The lines of a load run's `requests.jsonl` (or any file of such lines) as typed lines."""
    return cast(list[LoadLine], read_jsonl(path))


def as_json(record: Mapping[str, object]) -> dict[str, Any]:
    """A typed record (a TypedDict, a plain dict at run time) as the run directory's writer takes it: any JSON
    object (`RunDir.append`)."""
    return cast(dict[str, Any], record)


def as_json_lines(lines: Sequence[LoadLine]) -> list[dict[str, Any]]:
    """Typed request lines as the client layer's readers take them (`evalkit.client.lag`: any request line)."""
    return cast(list[dict[str, Any]], lines)


class Dist(TypedDict):
    """A load figure's distribution (`evalkit.load.metrics.dist`): percentiles, max, count, and each percentile's
    95% interval (None where the samples are too few to bound it)."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None
    n: int
    ci95: dict[str, list[float] | None]


class SloJson(TypedDict):
    """A target as summary.json lists it (`evalkit.load.slo.Target.to_json`)."""

    slo: str
    metric: str
    stat: str | None
    op: str
    limit: float
    scale: float


class SloCheck(SloJson):
    """A target judged on a point: its figure per repeat, their median and whether it met the target."""

    values: list[float | None]
    median: float | None
    met: bool


class PrecisionJson(TypedDict):
    """A precision stop as the manifest and summary record it (`PrecisionStop.to_json`)."""

    target_moe: float
    metric: str
    level: float
    min_requests: int
    max_requests: int


class StageJson(TypedDict):
    """One stage of a multi-stage profile as the manifest and summary name it (`Stage.to_json`)."""

    rate: float
    start_rate: float | None
    duration_s: float
    label: str


class TraceSettings(TypedDict):
    """What the manifest and summary record of a replayed trace: its file and how it was replayed."""

    file: str
    speedup: float
    window_s: list[float | None]
    sample: float
    block_tokens: int


class LoadSettings(TypedDict, total=False):
    """The manifest's `load`: what a load workload's plan records of itself (in the order each writes it); with the
    seed, the flags a run of the same name must match. Points write the search and shaping fields, the chat
    workloads their shape, a trace replay its `trace`."""

    slo: list[str]
    runs: int
    prompt_tokens: str
    output_tokens: str
    prefix_tokens: int
    timeout_s: float
    mode: str
    start_load: float
    search: str | None
    arrivals: str
    requests: int | None
    duration_s: float | None
    warmup: int | None
    search_max: float | None
    resolution: float
    burstiness: float
    burst_size: int
    ramp_up_s: float
    stages: list[StageJson] | None
    max_concurrency: int | None
    max_prefill: int | None
    precision: PrecisionJson | None
    reasoning_room: int
    client_hosts: int
    max_tokens: int | None
    users: int
    turns: int
    think_s: float
    groups: int
    users_per_group: int
    system_tokens: int
    cache_runs: str
    concurrency: int
    trace: TraceSettings


def common_settings(prompt_tokens: str, output_tokens: str, timeout_s: float) -> LoadSettings:
    """The manifest's `load` fields every workload beside the points records first: lengths and timeout (no
    targets, one run, no prefix)."""
    return {
        "slo": [],
        "runs": 1,
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "prefix_tokens": 0,
        "timeout_s": timeout_s,
    }
