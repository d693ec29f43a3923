"""The one list of server dialects: what evalkit knows of each kind of server, by kind. A new server is one
`Dialect` in `DIALECTS`: how it names itself (its `owned_by` in /v1/models), its label, the advice that fits it by
topic, and the names of its /metrics counters (prefix cache, draft acceptance). Who a server is comes from
evalkit.evidence.server_kind; what a server takes (request fields, tokenize forms, where it puts reasoning and usage)
is learned from the server itself by probes, not looked up here.

Topics of advice: metrics, tokenize, props, ignore_eos, usage, request_id, request_echo, timings, field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PrefixCacheCounters:
    """A server's /metrics counters of prompt tokens served from its prefix cache: `cached` against `total`, where
    `total` counts every prompt token or (`total_is_computed`) only those computed (then the total is the sum)."""

    cached: str
    total: str
    total_is_computed: bool = False

    @property
    def source(self) -> str:
        """How the hit rate is computed, in the counters' names."""
        if self.total_is_computed:
            return f"{self.cached} / (cached + {self.total})"
        return f"{self.cached} / {self.total}"


@dataclass(frozen=True)
class Dialect:
    """One kind of server."""

    kind: str
    label: str
    owned_by: tuple[str, ...] = ()  # the `owned_by` of its /v1/models entries
    advice: Mapping[str, str] = field(default_factory=dict)  # topic -> what to do or know on this server
    prefix_cache: PrefixCacheCounters | None = None
    spec_decode_prefix: str | None = None  # its draft-acceptance counters: PREFIX + num_drafts_total ...


DIALECTS: tuple[Dialect, ...] = (
    Dialect(
        "llama.cpp",
        "llama.cpp llama-server",
        owned_by=("llamacpp",),
        advice={
            "metrics": "start llama-server with --metrics",
            "props": "llama-server serves /props; an old build or a proxy in front may not",
            "timings": "llama-server sends timings in every stream; an old build may not",
            "ignore_eos": "llama-server honours ignore_eos; check the build",
        },
        prefix_cache=PrefixCacheCounters(
            "llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total", total_is_computed=True
        ),
        spec_decode_prefix="llamacpp:spec_decode_",
    ),
    Dialect(
        "vllm",
        "vLLM",
        owned_by=("vllm",),
        advice={
            "metrics": "vLLM serves /metrics on its API port; a proxy in front may not pass it",
            "tokenize": "vLLM serves POST /tokenize; a build behind a proxy may not pass it",
            "field": "vLLM refuses fields its request model does not define: check the name against its "
            "sampling parameters",
            "request_echo": "start vLLM with --enable-request-id-headers (it then echoes X-Request-Id) and "
            "--enable-log-requests (its log names each request and each abort), so its log lines match evalkit's "
            "requests; with VLLM_LOGGING_LEVEL=DEBUG it also logs each engine step, which settles cancel and "
            "head-of-line verdicts exactly (--server-log)",
            "timings": "vLLM sends no timings: its /metrics histograms and counters are the server's figures",
        },
        prefix_cache=PrefixCacheCounters("vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
        spec_decode_prefix="vllm:spec_decode_",
    ),
    Dialect(
        "sglang",
        "SGLang",
        owned_by=("sglang",),
        advice={
            "metrics": "start SGLang with --enable-metrics",
            "usage": "SGLang sends usage with stream_options.include_usage; an old build may not",
        },
        prefix_cache=PrefixCacheCounters("sglang:cached_tokens_total", "sglang:prompt_tokens_total"),
    ),
    Dialect(
        "fastllm",
        "FastLLM ftllm server",
        owned_by=("fastllm",),
        advice={
            "metrics": "FastLLM's ftllm server has no /metrics: evalkit's figures are the client's",
            "tokenize": "FastLLM's ftllm server has no tokenize endpoint: stress counts from usage",
            "ignore_eos": "FastLLM ignores ignore_eos: generations may end before --gen-tokens",
        },
    ),
    Dialect(
        "llama-cpp-python",
        "llama-cpp-python llama_cpp.server",
        owned_by=("me",),
        advice={
            "metrics": "llama-cpp-python's server has no /metrics",
            "tokenize": "llama-cpp-python serves POST /extras/tokenize",
            "request_id": "llama-cpp-python takes only a UUID X-Request-Id; evalkit sends UUIDs",
            "ignore_eos": "llama-cpp-python does not honour ignore_eos",
        },
    ),
    Dialect(
        "transformers",
        "transformers serve",
        advice={
            "metrics": "transformers serve has no /metrics: stress verdicts rest on the client's timing",
            "tokenize": "transformers serve has no tokenize endpoint: stress counts long prompts from usage",
            "props": "transformers serve has no /props",
            "ignore_eos": "transformers serve refuses fields OpenAI does not define (HTTP 422): evalkit "
            "does not send them and lets prompts run to max_tokens",
            "field": "transformers serve refuses fields OpenAI does not define (HTTP 422)",
            "timings": "transformers serve sends no server timings",
        },
    ),
    Dialect("unknown", "this server"),
)

# Which server's counters are read first where a /metrics page holds several (the sim publishes vLLM's names).
COUNTER_PRECEDENCE = ("vllm", "sglang", "llama.cpp")

_EXTRA: list[Dialect] = []  # registered at run time (tests)


def register(d: Dialect) -> Dialect:
    """Add a dialect for this process (before `unknown`); a built-in kind's name is an error."""
    if d.kind in (x.kind for x in DIALECTS):
        raise ValueError(f"a dialect may not be named {d.kind!r}: a built-in one has that name")
    _EXTRA.append(d)
    return d


def unregister(kind: str) -> None:
    """Forget a run-time dialect (tests)."""
    _EXTRA[:] = [d for d in _EXTRA if d.kind != kind]


def dialects() -> tuple[Dialect, ...]:
    """Every dialect: the built-ins, then run-time ones, `unknown` last."""
    return (*DIALECTS[:-1], *_EXTRA, DIALECTS[-1])


def dialect(kind: str | None) -> Dialect:
    """The dialect of this kind (unknown kinds: the plain one)."""
    return next((d for d in dialects() if d.kind == kind), DIALECTS[-1])


def kind_owning(owner: str) -> str | None:
    """The kind of server whose /v1/models entries are `owned_by` this name, or None."""
    return next((d.kind for d in dialects() if owner in d.owned_by), None)


def by_precedence() -> list[Dialect]:
    """The dialects in the order their /metrics counters are tried."""
    first = [dialect(k) for k in COUNTER_PRECEDENCE]
    return first + [d for d in dialects() if d not in first]
