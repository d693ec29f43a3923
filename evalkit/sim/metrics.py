"""The sim's `GET /metrics`: Prometheus text in vLLM's names, from the engine's state and the request traces.

Served: `vllm:num_requests_running` / `_waiting` gauges; `vllm:time_to_first_token_seconds` (first_token -
arrived: from the front end's arrival, as vLLM times it), and for finished requests only (vLLM never counts an
aborted one) `vllm:request_queue_time_seconds` (prefill_start - engine_intake: vLLM's engine core takes a request
in only between steps, so the time behind a running step is in the TTFT but not in the queue time),
`vllm:request_prefill_time_seconds` (prefill_done - prefill_start) and `vllm:request_decode_time_seconds`
(done - first_token) histograms, `vllm:prompt_tokens_total`
(prompts whose prefill finished), `vllm:generation_tokens_total` (tokens emitted), and with `--spec-accept` the
speculative-decoding counters `vllm:spec_decode_num_drafts_total`, `_num_draft_tokens_total`,
`_num_accepted_tokens_total` and `_num_accepted_tokens_per_pos_total{position=}`; with `--prefix-cache-blocks`
`vllm:prefix_cache_queries_total` and `vllm:prefix_cache_hits_total` (prompt tokens looked up, and hit).

Speculative decoding model: each verify pass (one decode step, as long as a plain step) drafts `len(accept)`
tokens for each running request; position i is accepted with probability `accept[i]` (non-increasing, and an
accepted position implies the earlier ones: vLLM's per-position rate). The pass emits the accepted drafts plus one
token of its own, so a stream decodes `decode_rate * (1 + sum(accept))` tokens/s. The draws are a Weyl sequence
(deterministic, evenly spread), so a few hundred passes reproduce the configured rates within a point.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from evalkit.sim.trace import RequestTrace

CONTENT_TYPE = CONTENT_TYPE_LATEST  # the exposition format's media type, which the sim's /metrics answers with

# vLLM's bucket edges for request-phase times (seconds).
TIME_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
_GOLDEN = (math.sqrt(5) - 1) / 2


def parse_accept(text: str) -> tuple[float, ...]:
    """`0.872,0.744,0.609` -> (0.872, 0.744, 0.609); ValueError unless each is in [0, 1] and none rises."""
    values = tuple(float(x) for x in text.split(",") if x.strip())
    if not values:
        raise ValueError("no values")
    if any(not 0.0 <= v <= 1.0 for v in values):
        raise ValueError("each acceptance must be between 0 and 1")
    if any(b > a for a, b in zip(values, values[1:])):
        raise ValueError("acceptance cannot rise with position (position i accepted means all before it were)")
    return values


@dataclass
class SpecDecoder:
    """Draws accepted draft lengths and keeps vLLM's speculative-decoding counters."""

    accept: tuple[float, ...]
    seed: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.per_pos = [0] * len(self.accept)
        self._u = (self.seed * _GOLDEN) % 1.0

    @property
    def enabled(self) -> bool:
        """Whether the engine drafts at all."""
        return bool(self.accept)

    def step(self, room: int) -> int:
        """Tokens one request gets from one verify pass, at most `room`; counts the draft."""
        if not self.accept:
            return 1
        self._u = (self._u + _GOLDEN) % 1.0
        k = sum(1 for a in self.accept if self._u < a)
        # Near max_tokens the pass can use fewer drafts; the counters say what the pass really accepted.
        k = min(k, max(0, room - 1))
        self.drafts += 1
        self.draft_tokens += len(self.accept)
        self.accepted += k
        for i in range(k):
            self.per_pos[i] += 1
        return 1 + k


def _histogram(name: str, doc: str, values: Iterable[float], labels: dict[str, str]) -> HistogramMetricFamily:
    vals = sorted(values)
    buckets, i = [], 0
    for edge in TIME_BUCKETS:
        while i < len(vals) and vals[i] <= edge:
            i += 1
        buckets.append((repr(edge), i))
    buckets.append(("+Inf", len(vals)))
    h = HistogramMetricFamily(name, doc, labels=list(labels))
    h.add_metric(list(labels.values()), buckets, sum(vals))
    return h


def render(
    model: str,
    running: int,
    waiting: int,
    traces: Sequence[RequestTrace],
    spec: SpecDecoder | None,
    spec_names: str = "vllm",
    prefix_cache: tuple[int, int] | None = None,
) -> bytes:
    """Prometheus exposition text of the sim's state now; `spec_names="llamacpp"` names the speculative-decoding
    counters as llama.cpp does (`llamacpp:spec_decode_*`, no labels)."""
    labels = {"model_name": model, "engine": "0"}
    keys, vals = list(labels), list(labels.values())

    def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
        g = GaugeMetricFamily(name, doc, labels=keys)
        g.add_metric(vals, value)
        return g

    def counter(name: str, doc: str, value: float) -> CounterMetricFamily:
        c = CounterMetricFamily(name, doc, labels=keys)
        c.add_metric(vals, value)
        return c

    # vLLM observes its request-phase histograms as a request finishes; an aborted one is never counted.
    finished = [t for t in traces if t.prefill_start is not None and t.status == "ok"]
    families = [
        gauge("vllm:num_requests_running", "Requests in model execution batches.", running),
        gauge("vllm:num_requests_waiting", "Requests waiting to be processed.", waiting),
        counter(
            "vllm:prompt_tokens",
            "Prefill tokens processed.",
            sum(t.prompt_tokens for t in traces if t.prefill_done is not None),
        ),
        counter("vllm:generation_tokens", "Generation tokens processed.", sum(t.completion_tokens for t in traces)),
        counter("vllm:request_success", "Successfully finished requests.", sum(t.status == "ok" for t in traces)),
        _histogram(
            "vllm:time_to_first_token_seconds",
            "Time from arrival to the first token.",
            (t.first_token - t.arrived for t in traces if t.first_token is not None),
            labels,
        ),
        _histogram(
            "vllm:request_queue_time_seconds",
            "Time spent waiting in the queue.",
            (t.prefill_start - (t.engine_intake or t.arrived) for t in finished if t.prefill_start is not None),
            labels,
        ),
        _histogram(
            "vllm:request_prefill_time_seconds",
            "Time spent in prefill.",
            (
                t.prefill_done - t.prefill_start
                for t in finished
                if t.prefill_done is not None and t.prefill_start is not None
            ),
            labels,
        ),
        _histogram(
            "vllm:request_decode_time_seconds",
            "Time spent in decode (first token to the end), finished requests.",
            (t.done - t.first_token for t in traces if t.status == "ok" and t.first_token and t.done),
            labels,
        ),
    ]
    if prefix_cache is not None:  # vLLM V1's counters, in tokens: (prompt tokens looked up, tokens hit)
        families += [
            counter("vllm:prefix_cache_queries", "Prefix cache queries, in tokens.", prefix_cache[0]),
            counter("vllm:prefix_cache_hits", "Prefix cache hits, in tokens.", prefix_cache[1]),
        ]
    if spec is not None and spec.enabled:
        pre = "llamacpp:" if spec_names == "llamacpp" else "vllm:"
        if pre == "llamacpp:":
            keys, vals = [], []
        families += [
            counter(pre + "spec_decode_num_drafts", "Number of spec decoding drafts.", spec.drafts),
            counter(pre + "spec_decode_num_draft_tokens", "Number of draft tokens.", spec.draft_tokens),
            counter(pre + "spec_decode_num_accepted_tokens", "Number of accepted tokens.", spec.accepted),
        ]
        per = CounterMetricFamily(
            pre + "spec_decode_num_accepted_tokens_per_pos",
            "Accepted tokens per draft position.",
            labels=[*keys, "position"],
        )
        for i, n in enumerate(spec.per_pos):
            per.add_metric([*vals, str(i)], n)
        families.append(per)
    return generate_latest(_Fixed(families))


class _Fixed(CollectorRegistry):
    """A registry that yields the families it was given (one render, no global registry)."""

    def __init__(self, families: list[Metric]) -> None:
        super().__init__(auto_describe=False)
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families
