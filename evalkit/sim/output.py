"""The token stream one request produces: reasoning first (in the configured format), then the answer.

Each element is one streamed token `(channel, text)` with channel `reasoning` or `content`. `max_tokens` counts
reasoning and answer together; a plan cut short ends with `length`, one that ran out of answer with `stop`, and
`ignore_eos` pads with filler to exactly `max_tokens` (`length`), `min_tokens` to at least that many; a model that
never stops (`never_stop`, `--never-stop`) pads every reply to its cap, max_tokens or the default, with or without them.
Unrecognised prompts get filler up to `max_tokens` (or `--filler-tokens` and `stop` when the request names no limit).
"""

from __future__ import annotations

from dataclasses import dataclass

from evalkit.client.tokens import tokenize
from evalkit.sim.answers import filler_tokens
from evalkit.sim.thinking import Thinking, reasoning_tokens

Token = tuple[str, str]


@dataclass(frozen=True)
class Output:
    """The tokens to stream and the finish reason once they are all sent."""

    tokens: tuple[Token, ...]
    finish_reason: str
    answer_from: int = 0  # index of the first answer token (the reasoning, tags included, comes before it)

    @property
    def reasoning_text(self) -> str:
        """Reasoning sent in a separate field (empty for inline formats)."""
        return "".join(t for ch, t in self.tokens if ch == "reasoning")

    @property
    def content_text(self) -> str:
        """Everything sent as content."""
        return "".join(t for ch, t in self.tokens if ch == "content")


def _reasoning_part(thinking: Thinking, fmt: str) -> list[Token]:
    if not thinking.on:
        return []
    toks = reasoning_tokens(thinking.budget)
    if fmt in ("reasoning_content", "reasoning"):
        return [("reasoning", t) for t in toks]
    inline = [("content", t) for t in toks]
    if fmt == "think_tags":
        return [("content", "<think>"), ("content", "\n")] + inline + [("content", "\n"), ("content", "</think>")]
    return inline + [("content", "\n"), ("content", "</think>")]  # think_close_only: the template opened the tag


def build_output(
    answer: str | None,
    thinking: Thinking,
    fmt: str,
    max_tokens: int | None,
    ignore_eos: bool,
    default_max_tokens: int,
    default_filler: int,
    min_tokens: int = 0,
    never_stop: bool = False,
) -> Output:
    """The plan for one request; `answer` None means filler."""
    head = _reasoning_part(thinking, fmt)
    limit = max(1, max_tokens) if max_tokens is not None else default_max_tokens
    if never_stop:  # no end of sequence ever: as ignore_eos, to whatever cap the request has
        ignore_eos, max_tokens = True, limit
    if answer is None:
        want = limit if max_tokens is not None else min(limit, len(head) + default_filler)
        body = filler_tokens(max(0, want - len(head)))
    else:
        body = tokenize(answer)
    if head and body and fmt in ("think_tags", "think_close_only"):
        body[0] = "\n\n" + body[0].lstrip()
    seq = head + [("content", t) for t in body]
    n = len(head)
    if len(seq) > limit:
        return Output(tuple(seq[:limit]), "length", n)
    if ignore_eos and max_tokens is not None and len(seq) < limit:
        pad = filler_tokens(limit - len(seq), offset=1)
        return Output(tuple(seq + [("content", t) for t in pad]), "length", n)
    if min_tokens > len(seq):  # vLLM's min_tokens: no end of sequence before that many tokens
        want = min(min_tokens, limit)
        pad = filler_tokens(want - len(seq), offset=1)
        return Output(tuple(seq + [("content", t) for t in pad]), "length" if want == limit else "stop", n)
    if answer is None and max_tokens is not None:
        return Output(tuple(seq), "length", n)
    return Output(tuple(seq), "stop", n)
