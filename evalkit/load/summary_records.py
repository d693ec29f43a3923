"""The blocks of a load run's `summary.json`, typed as they are written (`evalkit.load.summary` for points,
`evalkit.load.session_summary` for conversations and shared-prefix groups, `evalkit.load.trace_replay` for a
trace): a point's figures and verdict, the client's block, the workloads' own blocks. The pydantic `LoadSummary`
(evalkit.runs.schemas, evalkit.runs.load_parts) reads them back; these describe them where they are built.

TypedDicts: a block is a plain dict at run time, its keys in the order it is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypedDict, cast

from evalkit.evidence.capture import evidence_summary
from evalkit.evidence.prefix_cache_counters import PrefixCacheHits
from evalkit.load.records import Dist, PrecisionJson, SloCheck, SloJson, StageJson, TraceSettings


class PointMetrics(TypedDict, total=False):
    """One repeat of a load point (or its pooled repeats): `evalkit.load.metrics.point_metrics`."""

    requests: int
    errors: int
    wrong_answers: int
    error_rate: float | None
    ttft_s: Dist
    ttft_answer_s: Dist
    reasoning_tokens: Dist
    answer_tokens: Dist
    itl_ms: Dist
    e2e_s: Dist
    send_lateness_s: Dist
    cap_wait_s: Dist
    window_s: float | None
    throughput_rps: float | None
    goodput_rps: float | None
    good_requests: int
    prompt_tokens: Dist
    completion_tokens: Dist
    requested_rate: float
    scheduled_rate: float | None
    achieved_rate: float | None
    concurrency: int
    achieved_concurrency: float | None
    stream_idle_fraction: float | None
    valid: bool
    invalid_reasons: list[str]


class PointVerdict(TypedDict):
    """A point over its repeats (`evalkit.load.metrics.judge_point`): each target's check, valid, meets."""

    checks: list[SloCheck]
    valid: bool
    meets_slo: bool


class RepeatPrecision(TypedDict):
    """One repeat's precision stop: its measured count, margin at the end, and whether it stopped early."""

    measured: int
    moe: float | None
    stopped_early: bool
    reached: bool


class PointPrecision(PrecisionJson):
    """A point's precision stop: the rule, then each repeat's figures and whether every one reached it."""

    per_repeat: list[RepeatPrecision]
    reached: bool


class StageFigures(StageJson):
    """A multi-stage point's figures of one stage (its requests by the stage they were sent in)."""

    index: int
    requests: int
    metrics: PointMetrics


class PointJson(TypedDict, total=False):
    """One load point of `summary.json`: its load, verdict over repeats, pooled and per-repeat figures."""

    load: float
    label: str
    repeats: int
    checks: list[SloCheck]
    valid: bool
    meets_slo: bool
    metrics: PointMetrics
    per_repeat: list[PointMetrics]
    precision: PointPrecision
    stages: list[StageFigures]


class InvalidPoint(TypedDict):
    """A point where the client fell behind: its load and why."""

    load: float
    reasons: list[str]


class HostFigures(TypedDict):
    """One client host of a `--ray` run: its requests, lateness, read lag, error budget and clock figures."""

    client_host: int
    hostname: str | None
    node_ip: str | None
    requests: int
    send_lateness_s: Dist
    read_lag_p99_s: float | None
    error_budget_s: float | None
    clock_offset_s: list[float]
    clock_uncertainty_s: float
    round_trip_s: float
    clock_consistent: bool


class HostsBlock(TypedDict, total=False):
    """The `client` block's figures of a run sent from several hosts (`evalkit.load.client_hosts.hosts_summary`)."""

    hosts: list[HostFigures]
    clock_uncertainty_s: float | None
    timeline_error_budget_s: float | None


class ClientBlock(HostsBlock, total=False):
    """`client`: the client's send lateness, its own error budget, the invalid points, and the hosts' figures."""

    send_lateness_s: Dist
    read_lag_p99_s: float | None
    first_tokens_maybe_shared_stamp: int | None
    error_budget_s: float | None
    over_error_budget: bool | None
    invalid_points: list[InvalidPoint]


class Shaping(TypedDict):
    """`shaping`: the arrival shaping and caps the manifest recorded (None where a run predates one)."""

    burstiness: float | None
    burst_size: int | None
    ramp_up_s: float | None
    stages: list[StageJson] | None
    max_concurrency: int | None
    max_prefill: int | None
    precision: PrecisionJson | None


class WorkloadJson(TypedDict, total=False):
    """`workload`: the requests' lengths as given and the run's token scale."""

    prompt_tokens: str | None
    output_tokens: str | None
    prefix_tokens: int | None
    token_scale: float | None


class HitRateJson(TypedDict):
    """A prefix-cache hit rate from the answers' own `cache_n` (`evalkit.load.turns.hit_rate`)."""

    cached_tokens: int | None
    prompt_tokens: int | None
    hit_rate: float | None
    requests_reporting: int
    source: str | None


class SendError(TypedDict):
    """How far a trace's sends were from their times: the largest, and the share within 5 ms."""

    max: float | None
    within_5ms: float | None


class TraceFigures(TraceSettings):
    """`trace`: the replay's settings, what it sent, its send error and prefix-cache hit rates both ways."""

    lines_in_file: int
    requests_sent: int
    mean_rate_rps: float
    ideal_hit_rate: float | None
    send_error_s: SendError
    prefix_cache: HitRateJson
    prefix_cache_metrics: PrefixCacheHits | None


class TurnFigures(TypedDict):
    """One turn of a conversation run: its requests, latencies, prompt lengths and hit rate."""

    turn: int
    requests: int
    errors: int
    wrong_answers: int
    ttft_s: Dist
    e2e_s: Dist
    prompt_tokens: Dist
    prefix_cache: HitRateJson


class SessionFigures(TypedDict):
    """One user's session: turns done, how long it took, its requests' end-to-end time summed."""

    user: int
    turns_done: int
    duration_s: float
    e2e_sum_s: float


class SessionsBlock(TypedDict):
    """A conversation run's sessions: how many completed, their durations and each one's figures."""

    completed: int
    duration_s: Dist
    e2e_sum_s: Dist
    per_session: list[SessionFigures]


class ConversationJson(TypedDict, total=False):
    """`conversation` (`evalkit.load.conversation.summarise`, then the server's hit rate over the run)."""

    users: int
    turns: int
    think_s: float
    per_turn: list[TurnFigures]
    sessions: SessionsBlock
    prefix_cache: HitRateJson
    prefix_cache_metrics: PrefixCacheHits | None


class ResetTry(TypedDict, total=False):
    """One way of emptying the cache tried: its URL and the server's status, or the error that stopped it."""

    url: str
    status: int | None
    error: str


class CacheResetJson(TypedDict):
    """What a cold run did to the server's cache (`evalkit.load.cache_reset.reset_prefix_cache`)."""

    reset: bool
    method: str | None
    tried: list[ResetTry]


class SessionRecord(TypedDict, total=False):
    """One line of `sessions.jsonl`: a conversation's user (`user`, `turns_done`, `started`, `finished`) or a
    shared-prefix run (`run`: cold or warm, its cache `reset`, whether it `primed` the cache first)."""

    user: int
    turns_done: int
    started: float
    finished: float
    run: str
    reset: CacheResetJson | None
    primed: bool


class SharedPrefixRunJson(TypedDict, total=False):
    """One run of a shared-prefix workload in `summary.json`: its record, then its figures."""

    run: str
    reset: CacheResetJson | None
    primed: bool

    first_users_cache_n: list[int | None]
    cold_verified: bool | None
    requests: int
    errors: int
    wrong_answers: int
    ttft_s: Dist
    e2e_s: Dist
    prefix_cache: HitRateJson
    per_group: list[HitRateJson]


class SharedPrefixJson(TypedDict, total=False):
    """`shared_prefix` (`evalkit.load.shared_prefix.summarise`, then the server's hit rate over the run)."""

    groups: int
    users_per_group: int
    system_tokens: int
    concurrency: int
    runs: list[SharedPrefixRunJson]
    prefix_cache_metrics: PrefixCacheHits | None


class LoadSummaryJson(TypedDict, total=False):
    """A load run's `summary.json` as its workload builds it (the evidence blocks, `evalkit.evidence.capture`,
    follow): the totals every workload writes, a points run's search and client figures, a workload's own block."""

    kind: str
    seed: int | None
    mode: str
    arrivals: str | None
    shaping: Shaping
    search: str | None
    runs_per_point: int
    slo: list[SloJson]
    workload: WorkloadJson
    requests: int
    errors: int
    wrong_answers: int
    points: list[PointJson]
    max_load_meeting_slo: float | None
    first_failing_load: float | None
    bounded: bool
    goodput_rps_at_max: float | None
    client: ClientBlock
    max_concurrency_meeting_slo: float | None
    max_rate_meeting_slo: float | None
    conversation: ConversationJson
    shared_prefix: SharedPrefixJson
    trace: TraceFigures


def with_evidence(summary: LoadSummaryJson, path: Path) -> LoadSummaryJson:
    """The workload's summary followed by the server's evidence blocks of the run at `path` (`server_metrics`,
    `server_log` ...: evalkit.evidence.capture types and writes them)."""
    return cast(LoadSummaryJson, {**summary, **evidence_summary(path)})
