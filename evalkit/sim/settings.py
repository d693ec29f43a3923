"""The engine's knobs, one frozen record; `evalkit sim` builds it from defaults, a profile, then explicit flags."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import TypedDict

# A setting's value as `/sim/config` shows it (a tuple is a JSON array).
SettingValue = bool | int | float | str | tuple[float, ...] | tuple[str, ...] | None

REASONING_FORMATS = ("reasoning_content", "reasoning", "think_tags", "think_close_only")


@dataclass(frozen=True)
class SimSettings:
    """Every setting of the simulated engine; durations are model seconds, divided by `time_scale` when run."""

    model: str = "evalkit-sim"
    time_scale: float = 1.0
    prefill_rate: float = 2000.0  # prompt tokens per second
    prefill_chunk: int = 2048  # tokens per prefill chunk (and the yield granularity)
    decode_rate: float = 100.0  # tokens per second for one stream
    batch_decode_rate: float = 250.0  # combined tokens per second with every slot busy
    # A jittery server: each request decodes at its rate times exp(-decode_jitter * z), z a standard normal drawn
    # per request from --seed; the per-request rate's median stays decode_rate (bench --until-sure's truth).
    decode_jitter: float = 0.0
    max_batch: int = 4
    clamp_batch: bool = False  # fault: silently serve one request at a time
    yield_prefill: bool = True  # long prefill yields between chunks
    yield_decode_steps: int = 2  # decode steps run between two chunks of a long prefill
    long_threshold: int = 2048  # prompts longer than this are "long"
    cancel_aborts: bool = True  # cancel stops prefill at the next chunk boundary
    accuracy: float = 1.0
    # A judge's equality-check prompt (evalkit_evals.model_judge) is answered Yes/No/Unsure by comparing its two
    # answers; this fraction of verdicts is flipped (drawn per prompt from --seed), as a fallible judge model.
    judge_error_rate: float = 0.0
    seed: int = 0
    data_dir: str | None = None
    reasoning_format: str = "reasoning_content"
    default_thinking: str = "off"
    fail_rate: float = 0.0
    disconnect_rate: float = 0.0
    stall_rate: float = 0.0
    stall_s: float = 5.0
    wrong_when_batched: bool = False
    # Answers that degrade when busy (FastLLM on the H200): a capability answer goes wrong with this probability
    # (drawn per question and sample, from --seed) whenever another request shares its batch.
    wrong_when_batched_rate: float = 0.0
    default_max_tokens: int = 4096  # a request without max_tokens stops here at the latest
    filler_tokens: int = 200  # filler length when the request names no max_tokens
    profile: str | None = None
    # Real servers' quirks (evalkit/sim/compat.py), off by default.
    uuid_request_ids: bool = False  # a non-UUID X-Request-Id gets a bare HTTP 400 (llama-cpp-python)
    reject_fields: tuple[str, ...] = ()  # body fields answered with HTTP 400 naming the field
    ignore_fields: tuple[str, ...] = ()  # body fields taken (HTTP 200) and given no effect (ignore_eos, min_tokens)
    chatty_tokens: int = 0  # a small model that talks on: each recognised answer runs this many tokens more
    never_stop: bool = False  # a model that never ends a reply on its own (random weights): every reply runs to its cap
    stream_usage: bool = True  # honour stream_options.include_usage
    tokenize_endpoint: bool = True  # serve POST /tokenize
    # What the server says about itself (issue 11): /metrics in vLLM names, speculative decoding, start-up log lines.
    metrics: bool = True  # serve GET /metrics
    spec_accept: tuple[float, ...] = ()  # per-position draft acceptance; draft length = number of values
    spec_metric_names: str = "vllm"  # vllm | llamacpp: whose names the speculative-decoding counters carry
    context_tokens: int = 262144  # context per request, told in the start-up log line
    server_log: str | None = None  # write log lines here (--server-log-file)
    # Behaviours seen on real servers (issue 10), each off unless asked for; ground truth in /sim/events.
    cancel_batch_tokens: int = 0  # with cancel_aborts: honoured only at the end of a prefill batch of B tokens
    housekeeping_s_per_token: float = 0.0  # after a request, the engine stores its state: s per context token
    kill_on_new_request: bool = False  # a new request ends the stream in progress (HTTP 200, no finish_reason)
    timings: bool = True  # llama.cpp-style `timings` in the last chunk (and non-streaming answers)
    # A strict OpenAI-only server (issue 33: transformers serve, pydantic request models with extra="forbid").
    strict_fields: bool = False  # HTTP 422 with a pydantic `extra_forbidden` body on any field OpenAI does not define
    done_marker: bool = True  # end a stream with `data: [DONE]`
    usage_in_finish_chunk: bool = False  # usage rides the finish chunk instead of a chunk of its own
    openai_only: bool = False  # 404 on /metrics, /tokenize, /props (the sim's own /sim/* stay served)
    pin_model: bool = False  # HTTP 400 for a request naming another model than --model
    # Issue 27: requests that share a step, and a silent store after a launch.
    step_tokens: int = 0  # every step takes up to B tokens, shared by the slots' prompts in launch order (llama.cpp -b)
    idle_save_s_per_token: float = 0.0  # at a launch, idle slots' unsaved states are stored: s per token, silently
    trace_log: bool = False  # also write llama.cpp's trace-level lines (-lv 4): the idle-slot save
    log_timestamps: bool = False  # prefix each log line with llama.cpp's own stamp (M.SS.mmm.uuu since start)
    # Issue 31: a block-hash prefix cache (evalkit/sim/prefix_cache.py); 0 blocks = no cache.
    prefix_cache_blocks: int = 0  # LRU size in blocks
    prefix_block_tokens: int = 16  # tokens per block (vLLM's default block size)
    # Issue 40: vLLM's running/waiting gauges are the scheduler's state as the last engine step ended, so during one
    # long prefill step they still read what they read before it (0 on an idle server).
    step_gauges: bool = False

    @property
    def slots(self) -> int:
        """Requests the engine really serves at once."""
        return 1 if self.clamp_batch else max(1, self.max_batch)

    def to_json(self) -> dict[str, SettingValue]:
        """The settings as `/sim/config` shows them (plus the effective slot count)."""
        d = asdict(self)
        d["effective_max_batch"] = self.slots
        return d


def field_names() -> list[str]:
    """Names of every setting."""
    return [f.name for f in fields(SimSettings)]


class SimConfig(TypedDict):
    """`/sim/config` as a client reads it back (`SimSettings.to_json` through JSON: its tuples are lists), then the
    effective slot count (tests/test_sim_engine.py holds the names to SimSettings' fields)."""

    model: str
    time_scale: float
    prefill_rate: float
    prefill_chunk: int
    decode_rate: float
    batch_decode_rate: float
    decode_jitter: float
    max_batch: int
    clamp_batch: bool
    yield_prefill: bool
    yield_decode_steps: int
    long_threshold: int
    cancel_aborts: bool
    accuracy: float
    judge_error_rate: float
    seed: int
    data_dir: str | None
    reasoning_format: str
    default_thinking: str
    fail_rate: float
    disconnect_rate: float
    stall_rate: float
    stall_s: float
    wrong_when_batched: bool
    wrong_when_batched_rate: float
    default_max_tokens: int
    filler_tokens: int
    profile: str | None
    uuid_request_ids: bool
    reject_fields: list[str]
    ignore_fields: list[str]
    chatty_tokens: int
    never_stop: bool
    stream_usage: bool
    tokenize_endpoint: bool
    metrics: bool
    spec_accept: list[float]
    spec_metric_names: str
    context_tokens: int
    server_log: str | None
    cancel_batch_tokens: int
    housekeeping_s_per_token: float
    kill_on_new_request: bool
    timings: bool
    strict_fields: bool
    done_marker: bool
    usage_in_finish_chunk: bool
    openai_only: bool
    pin_model: bool
    step_tokens: int
    idle_save_s_per_token: float
    trace_log: bool
    log_timestamps: bool
    prefix_cache_blocks: int
    prefix_block_tokens: int
    step_gauges: bool
    effective_max_batch: int
