"""The per-request record every command writes to `requests.jsonl`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from evalkit.runs.json_value import JsonValue
from evalkit.runs.schemas import RequestLine


@dataclass
class RequestRecord:
    """What the client saw of one chat request; times are epoch seconds from one `Clock`."""

    request_id: str
    t_sent: float
    t_first_byte: float | None = None
    t_first_token: float | None = None
    # The first token of the answer itself, after any reasoning (a reasoning field, or an inline <think> block).
    t_first_answer_token: float | None = None
    t_done: float | None = None
    status: str = "ok"
    error: str | None = None
    http_status: int | None = None
    content: str = ""
    reasoning: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # "server" when the server sent usage, "chunks" when counted from content/reasoning chunks.
    usage_source: str | None = None
    # Arrival time of every chunk that carried content or reasoning text (one per token on most servers).
    chunk_times: list[float] = field(default_factory=list)
    reasoning_chunks: int = 0
    content_chunks: int = 0
    # Completion tokens split into reasoning and answer: the server's `completion_tokens_details.reasoning_tokens`
    # where it sends one (`token_split_source` "server"), else counted from the chunks ("chunks").
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    token_split_source: str | None = None
    # Times the request was sent again because the server closed a pooled connection before answering.
    connection_retries: int = 0
    # How late the client read this answer's bytes after the kernel received them, at worst (plain http on Linux,
    # where chunk times are the kernel's receive stamps; None elsewhere). Large values mean a busy client: its
    # stamps stay true, but what it does on a token (cancel, send the next request) happens that much later.
    read_lag_s: float | None = None
    # How far the first token's stamp may lie after the token truly arrived: 0.0 when the read that carried it held
    # nothing after it (the stamp is its own); else the time since the piece before it, because bytes that wait
    # unread are merged and keep the newest stamp (the first token may share a later one's). None without receive
    # stamps or without a first token.
    first_token_stamp_bound_s: float | None = None
    # Server-specific timing extras (llama.cpp `timings`), kept verbatim.
    server_timings: dict[str, JsonValue] | None = None
    # Caller-supplied labels: cycle, scenario, question id, run number ...
    tags: dict[str, JsonValue] = field(default_factory=dict)

    @property
    def ttft_s(self) -> float | None:
        """Time to first token (content or reasoning), from the moment the request was sent."""
        if self.t_first_token is None:
            return None
        return self.t_first_token - self.t_sent

    @property
    def ttft_answer_s(self) -> float | None:
        """Time to the first answer token (after reasoning), from the moment the request was sent."""
        if self.t_first_answer_token is None:
            return None
        return self.t_first_answer_token - self.t_sent

    @property
    def decode_tok_s(self) -> float | None:
        """Completion tokens after the first over the time from first to last token."""
        if not self.chunk_times or self.completion_tokens is None or self.completion_tokens < 2:
            return None
        span = self.chunk_times[-1] - self.chunk_times[0]
        if span <= 0:
            return None
        return (self.completion_tokens - 1) / span

    @property
    def request_tok_s(self) -> float | None:
        """Completion tokens over the whole request, from send to done."""
        if self.t_done is None or self.completion_tokens is None:
            return None
        span = self.t_done - self.t_sent
        return self.completion_tokens / span if span > 0 else None

    def to_json(self, with_chunk_times: bool = False) -> dict[str, JsonValue]:
        """The `requests.jsonl` line (`RequestLine`, in its order): the record's fields (`chunk_times` only when
        asked), its derived figures (`ttft_s` ...), then its labels at the top level so a line reads flat (`cycle`,
        `scenario`, `qid` ...). Built unvalidated: a server's odd value is recorded, not a reason to lose the line."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}  # the dump below copies what it holds
        if not with_chunk_times:
            d.pop("chunk_times")
        tags = d.pop("tags")
        d["ttft_s"] = self.ttft_s
        d["ttft_answer_s"] = self.ttft_answer_s
        d["decode_tok_s"] = self.decode_tok_s
        d["request_tok_s"] = self.request_tok_s
        d["t_last_token"] = self.chunk_times[-1] if self.chunk_times else None
        d.update({k: v for k, v in tags.items() if k not in d})
        return RequestLine.model_construct(**d).to_json()
