"""Typed parts of a summary's server evidence, as the report reads them: the /metrics counters and gauges over the
run (`server_metrics`, evalkit.evidence.server_metrics.summarize_metrics), draft acceptance
(`spec_decode`, evalkit.evidence.spec_decode.spec_summary) and the server log's flagged lines (`server_log`,
evalkit.evidence.server_log.summarize_log).

As `summary_parts`: every field optional, extra keys kept, numbers as written.
"""

from __future__ import annotations

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict  # pydantic reads typing's TypedDict only from Python 3.12

from evalkit.runs.summary_parts import Number, Part


class GaugeRange(Part):
    """A gauge's minimum, maximum and last value over the run's scrapes."""

    min: Number | None = None
    max: Number | None = None
    last: Number | None = None


class ServerMetrics(Part):
    """`server_metrics`: how many /metrics scrapes answered, counter deltas before -> after, gauge ranges."""

    url: str | None = None
    available: bool | None = None
    scrapes: int | None = None
    ok: int | None = None
    failed: int | None = None
    first_error: str | None = None
    windows: int | None = None
    counters: dict[str, Number] = {}
    gauges: dict[str, GaugeRange] = {}


class Acceptance(Part):
    """Draft acceptance over a window: from the server's counters (per position), its gauges (SGLang, with a
    caveat) or llama.cpp's per-request timings."""

    source: str | None = None
    caveat: str | None = None
    drafts: Number | None = None
    draft_tokens: Number | None = None
    accepted_tokens: Number | None = None
    acceptance_rate: Number | None = None
    mean_acceptance_length: Number | None = None
    per_position: list[Number] = []


class SpecDecode(Part):
    """`spec_decode`: the run's acceptance, each bench prompt's (`per_label`), and from timings beside them."""

    run: Acceptance | None = None
    per_label: dict[str, Acceptance] = {}
    timings: Acceptance | None = None
    timings_per_label: dict[str, Acceptance] = {}


@with_config(ConfigDict(extra="allow", strict=True))
class FlaggedLineJson(TypedDict, total=False):
    """One of `server_log.flagged_lines` as summary.json holds it (evalkit.evidence.server_log.summarize_log): its
    time, the line, its flags, whether it came before the run; a plain dict, its values as written."""

    t: Number
    line: str
    flags: list[str]
    earlier: bool


class ServerLog(Part):
    """`server_log`: the log file read, its lines, and the flagged ones (the first kept in full)."""

    path: str | None = None
    lines: int | None = None
    flagged: int = 0
    flagged_lines: list[FlaggedLineJson] = []
