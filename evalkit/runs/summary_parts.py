"""Typed parts that summaries of several kinds share: a distribution of samples, the GPU memory cards and their leak
verdict, and what the client says about its own timing. The kind summaries (`evalkit.runs.schemas`) declare them;
the report reads them as these models instead of as dicts.

Every field is optional and extra keys are kept: runs written by earlier versions, and by other commands that add
their own facts, still read; a value of the wrong type is an error naming the file and key (`schemas.validate`).
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
    with_config,
)
from typing_extensions import TypedDict  # pydantic reads typing's TypedDict only from Python 3.12

Number = int | float  # as written: an int stays an int (a report shows 3, not 3.0)


class Part(BaseModel):
    """A block of a summary: typed fields, extra keys kept (a writer may add facts a reader does not know yet).

    A part is written as it was given: `to_json()` gives its keys in the order the writer put them (pydantic would put
    declared fields first, then extras) and only the keys it was given, so a summary written through its record is
    the file it was before there was a record, byte for byte."""

    model_config = ConfigDict(extra="allow", strict=True)
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: ModelWrapValidatorHandler[Part]) -> Part:
        part = handler(data)
        if isinstance(data, dict):
            part._order = tuple(data)
        return part

    @model_serializer(mode="wrap")
    def _in_written_order(self, handler: SerializerFunctionWrapHandler) -> Any:
        out = handler(self)
        if not self._order or not isinstance(out, dict):
            return out
        rank = {k: i for i, k in enumerate(self._order)}
        return dict(sorted(out.items(), key=lambda kv: rank.get(kv[0], len(rank))))

    def to_json(self) -> dict[str, Any]:
        """The block as its file holds it: the keys it was given, in the order given."""
        return self.model_dump(exclude_unset=True)


class Distribution(Part):
    """`evalkit.stats.distribution`: percentiles (`p50`, `p95`; load adds `p90`, `p99`), `max` and `n`. A number
    stays as written (an int is not read as a float: a report shows 3, not 3.0)."""

    p50: Number | None = None
    p90: Number | None = None
    p95: Number | None = None
    p99: Number | None = None
    max: Number | None = None
    n: int | None = None

    def statistic(self, name: str) -> Number | None:
        """The statistic named as summary.json names it (`p95`, `max`, `n` ...); None when absent."""
        v = getattr(self, name, None)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


@with_config(ConfigDict(extra="allow", strict=True))
class NotExercisedJson(TypedDict):
    """A stress summary's `not_exercised` entry as summary.json holds it (evalkit_stress.exercised.summary): how many
    requests, by reason, plus any key a later writer adds; a plain dict, its keys as written (`NotExercised` reads
    it)."""

    count: int
    reasons: dict[str, int]


class NotExercised(Part):
    """A stress summary's `not_exercised` entry for one metric: requests whose planned situation did not happen,
    and how many for each reason."""

    count: int = 0
    reasons: dict[str, int] = {}


class GpuCard(Part):
    """One card of a summary's `gpu_memory` (evalkit.evidence.gpu_memory.summarize_gpu): its memory over the run
    and three least-squares slopes, each with its noise."""

    index: int | None = None
    name: str | None = None
    samples: int | None = None
    total_mib: Number | None = None
    first_mib: Number | None = None
    last_mib: Number | None = None
    peak_mib: Number | None = None
    growth_mib: Number | None = None
    range_mib: Number | None = None
    cycles: list[Any] = []
    cycle_peak_mib: list[Number] = []
    slope_mib_per_cycle: Number | None = None
    slope_noise_mib_per_cycle: Number | None = None
    slope_mib_per_hour: Number | None = None
    slope_noise_mib_per_hour: Number | None = None
    slope_mib_per_request: Number | None = None
    slope_noise_mib_per_request: Number | None = None
    slope_mib_per_second: Number | None = None
    slope_noise_mib_per_second: Number | None = None
    slopes: dict[str, dict[str, Number | str | None]] | None = None  # by unit; present in runs with per-request slopes
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
    token_gap_p50_s: Number | None = None
    decode_vs_server_p50: Number | None = None
    client_bound: bool | None = None
    note: str | None = None
    error_budget_s: Number | None = None
    first_tokens_maybe_shared_stamp: int | None = None
    distorted: bool | None = None
    distortion_reasons: list[str] = []


class MeanMax(Part):
    """A card's power or utilisation over the run: mean and max."""

    mean: Number | None = None
    max: Number | None = None


class TelemetryCard(Part):
    """One card's power, utilisation and memory over the run (evalkit.evidence.gpu_telemetry)."""

    gpu: int
    name: str | None = None
    power_w: MeanMax | None = None
    sm_util_pct: MeanMax | None = None
    mem_used_mib_max: Number | None = None
    energy_j: Number | None = None
    samples: int | None = None


class TelemetryWindow(Part):
    """Energy over a stretch of the run (the whole run, or one label's requests)."""

    energy_j: Number | None = None
    output_tokens: int | None = None
    j_per_output_token: Number | None = None
    seconds: Number | None = None
    power_w_mean: Number | None = None


class GpuTelemetry(Part):
    """A summary's `gpu_telemetry`: where the figures came from, each card, the run's energy and each label's."""

    source: str | None = None
    energy_from: str | None = None
    cards: list[TelemetryCard] = []
    run: TelemetryWindow | None = None
    per_label: dict[str, TelemetryWindow] = {}


class StoppedRequest(Part):
    """A bench summary's `stopped_early` entry (evalkit.bench.throughput.summarize): a measured request that ended
    before max_tokens."""

    request_id: str
    prompt: str | None = None
    run: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
