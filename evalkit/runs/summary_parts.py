"""Typed parts that summaries of several kinds share: a distribution of samples, the GPU memory cards and their leak
verdict, and what the client says about its own timing. The kind summaries (`evalkit.runs.schemas`) declare them;
the report reads them as these models instead of as dicts.

Every field is optional and extra keys are kept: runs written by earlier versions, and by other commands that add
their own facts, still read; a value of the wrong type is an error naming the file and key (`schemas.validate`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Part(BaseModel):
    """A block of a summary: typed fields, extra keys kept (a writer may add facts a reader does not know yet)."""

    model_config = ConfigDict(extra="allow", strict=True)


class Distribution(Part):
    """`evalkit.stats.distribution`: percentiles (`p50`, `p95`; load adds `p90`, `p99`), `max` and `n`."""

    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None
    n: int | None = None


class GpuCard(Part):
    """One card of a summary's `gpu_memory` (evalkit.evidence.gpu_memory.summarize_gpu): its memory over the run
    and three least-squares slopes, each with its noise."""

    index: int | None = None
    name: str | None = None
    samples: int | None = None
    total_mib: float | None = None
    first_mib: float | None = None
    last_mib: float | None = None
    peak_mib: float | None = None
    growth_mib: float | None = None
    range_mib: float | None = None
    cycles: list[Any] = []
    cycle_peak_mib: list[float] = []
    slope_mib_per_cycle: float | None = None
    slope_noise_mib_per_cycle: float | None = None
    slope_mib_per_hour: float | None = None
    slope_noise_mib_per_hour: float | None = None
    slope_mib_per_request: float | None = None
    slope_noise_mib_per_request: float | None = None
    slope_mib_per_second: float | None = None
    slope_noise_mib_per_second: float | None = None
    slopes: dict[str, Any] | None = None  # present in runs summarised with per-request slopes
    leak_by: list[str] | None = None
    verdict: str | None = None


class GpuMemoryVerdict(Part):
    """A stress run's `gpu_memory_verdict` (evalkit.evidence.gpu_memory.leak_verdict)."""

    verdict: str
    evidence: str | None = None
    leak_suspected_on: list[int] = []
    cards_growing: int | None = None
    cards: int | None = None
    cant_tell_on: list[int] = []


class ClientTiming(Part):
    """A summary's `client`: how late the client read answers (evalkit.client.lag.client_lag), its error budget,
    and for stress and load whether it distorted the run (sent or cancelled late)."""

    read_lag_s: Distribution | None = None
    token_gap_p50_s: float | None = None
    decode_vs_server_p50: float | None = None
    client_bound: bool | None = None
    note: str | None = None
    error_budget_s: float | None = None
    first_tokens_maybe_shared_stamp: int | None = None
    distorted: bool | None = None
    distortion_reasons: list[str] = []
