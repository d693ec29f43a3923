"""The one list of stress metrics. Everything that used to name a metric by hand asks here: the summary's `metrics`
(which requests feed each one, in this order), the request lines' `metric` tag, the not-exercised counts, the
report's table (its row order, headline statistic, better direction and raw samples) and the gate (any
`stress.metrics.NAME.STAT`).

Adding a metric is one entry in `BUILTIN` (a `LineMetric` for a figure read off single requests, a `CycleMetric`
for one of a cycle's two concurrent generations taken together); `register` adds one for this process (tests).
A verdict that reads particular figures (stress/diagnose.py) names them itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.errors import UsageError

# The line fields a `LineMetric` may read; "t_done-t_sent" is the request's whole time.
WHOLE_TIME = "t_done-t_sent"


@dataclass(frozen=True)
class LineMetric:
    """One sample per finished request: of these scenarios in this role, or (`scenarios` None) of every request."""

    name: str
    scenarios: tuple[str, ...] | None
    role: str | None
    field: str
    # The statistic the report's row shows: p95 for waits, the worst for the post-cancel wait, p50 for rates.
    headline: str = "p95"
    higher_is_better: bool = False
    # Place in the report's stress table (lower first); None: after the ranked ones, as found.
    table_rank: int | None = None
    # Measured on the same requests as another metric: its not-exercised count and its line tag are that one's.
    same_requests_as: str | None = None
    # Only in runs whose server reasoned (some answer had reasoning tokens).
    needs_reasoning: bool = False

    def feeds(self, scenario: str | None, role: str | None) -> bool:
        """Whether a request of this scenario and role is one of this metric's samples."""
        return self.scenarios is not None and scenario in self.scenarios and role == self.role


@dataclass(frozen=True)
class CycleMetric:
    """One sample per cycle from its two concurrent generations (`pair_stat`: a key of stress.metrics.pair_stats)."""

    name: str
    pair_stat: str
    headline: str = "p50"
    higher_is_better: bool = True
    table_rank: int | None = None
    same_requests_as: str | None = None
    # The report marks it by a bootstrap over its per-cycle samples (else by its distribution only).
    bootstrap: bool = False
    # The scenario and role of the requests it is measured on (for the not-exercised count).
    scenario: str = "concurrent_gen"
    role: str = "gen_pair"
    needs_reasoning: bool = False

    def feeds(self, scenario: str | None, role: str | None) -> bool:
        """Whether a request of this scenario and role is part of this metric's pairs."""
        return scenario == self.scenario and role == self.role


StressMetric = LineMetric | CycleMetric

BUILTIN: tuple[StressMetric, ...] = (
    LineMetric("long_prefill_s", ("long_alone",), "long", "ttft_s", table_rank=5),
    LineMetric("long_prefill_with_inserts_s", ("short_insert", "double_insert"), "long", "ttft_s", table_rank=6),
    LineMetric("short_insert_ttft_s", ("short_insert",), "short", "ttft_s", table_rank=1),
    LineMetric(
        "short_insert_done_s",
        ("short_insert",),
        "short",
        WHOLE_TIME,
        table_rank=2,
        same_requests_as="short_insert_ttft_s",
    ),
    LineMetric("double_insert_ttft_s", ("double_insert",), "short", "ttft_s", table_rank=3),
    LineMetric("post_cancel_ttft_s", ("cancel_then_short",), "short", "ttft_s", headline="max", table_rank=4),
    LineMetric("short_alone_ttft_s", ("short_baseline",), "short", "ttft_s"),
    CycleMetric("concurrent_combined_tok_s", "combined_tok_s", table_rank=7, bootstrap=True),
    LineMetric(
        "concurrent_stream_tok_s",
        ("concurrent_gen",),
        "gen_pair",
        "decode_tok_s",
        headline="p50",
        higher_is_better=True,
        same_requests_as="concurrent_combined_tok_s",
    ),
    LineMetric(
        "gen_alone_tok_s", ("concurrent_gen",), "gen_solo", "decode_tok_s", headline="p50", higher_is_better=True
    ),
    CycleMetric("effective_concurrency", "effective_concurrency", same_requests_as="concurrent_combined_tok_s"),
    CycleMetric("concurrency_speedup", "speedup", same_requests_as="concurrent_combined_tok_s"),
    LineMetric("short_insert_ttft_answer_s", ("short_insert",), "short", "ttft_answer_s", needs_reasoning=True),
    LineMetric("reasoning_tokens", None, None, "reasoning_tokens", headline="p50", needs_reasoning=True),
    LineMetric("answer_tokens", None, None, "answer_tokens", headline="p50", needs_reasoning=True),
)

_EXTRA: dict[str, StressMetric] = {}  # registered at run time (tests)


def register(metric: StressMetric) -> StressMetric:
    """Add a metric for this process (after the built-ins); a built-in's name is a usage error."""
    if any(m.name == metric.name for m in BUILTIN):
        raise UsageError(f"a stress metric may not be named {metric.name!r}: a built-in metric has that name")
    _EXTRA[metric.name] = metric
    return metric


def unregister(name: str) -> None:
    """Forget a run-time metric (tests)."""
    _EXTRA.pop(name, None)


def metrics() -> tuple[StressMetric, ...]:
    """Every metric, in the order the summary lists them: the built-ins, then run-time ones as registered."""
    return (*BUILTIN, *_EXTRA.values())


def get(name: str) -> StressMetric | None:
    """The metric of this name, or None (a summary from another evalkit version may hold metrics unknown here)."""
    return next((m for m in metrics() if m.name == name), None)


def table_order() -> tuple[str, ...]:
    """The report's stress rows that come first, in order (the write-up's table)."""
    ranked = [m for m in metrics() if m.table_rank is not None]
    return tuple(m.name for m in sorted(ranked, key=lambda m: m.table_rank or 0))


def line_metric(scenario: str | None, role: str | None) -> LineMetric | None:
    """The metric a request's own timing feeds (its `metric` tag): the first per-request metric of its scenario and
    role (reasoning-only figures aside)."""
    return next(
        (m for m in metrics() if isinstance(m, LineMetric) and not m.needs_reasoning and m.feeds(scenario, role)),
        None,
    )


def exercised_key(scenario: str | None, role: str | None) -> str | None:
    """The metric under which a request that did not exercise its situation is counted (summary's
    `not_exercised`): the metric it feeds, or the one whose requests those are."""
    for m in metrics():
        if not m.needs_reasoning and m.feeds(scenario, role):
            return m.same_requests_as or m.name
    return None


def headline(name: str) -> str:
    """The statistic the report shows for a metric (unknown ones: p95 for a time, p50 otherwise)."""
    m = get(name)
    if m is not None:
        return m.headline
    return "p95" if name.endswith("_s") and not name.endswith("tok_s") else "p50"


def higher_is_better(name: str) -> bool:
    """Whether a larger value is better (unknown metrics: the rates, by their name)."""
    m = get(name)
    return m.higher_is_better if m is not None else name.endswith("tok_s")


def same_requests(name: str) -> str:
    """The metric whose requests this one is measured on (itself, mostly)."""
    m = get(name)
    return (m.same_requests_as if m is not None else None) or name
