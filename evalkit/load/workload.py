"""What a load run asks: prompts of a chosen length in tokens, each ending in a count whose answer is known.

Every request is `<shared prefix> <own filler> Count from 1 to n ...`: the prefix (P tokens, the same for every
request of the run) exercises a prefix cache, the request's own filler brings the prompt to its length, and the
count fixes the output length (about 2n - 1 tokens) while staying checkable. n moves through nine neighbouring
values by request index, so requests close in the sequence (the ones in flight together) never share an answer
and a response delivered to the wrong request is caught as wrong. Token counts follow the sim's rule
(evalkit/client/tokens.py); the server's own counts are recorded per request (`prompt_tokens`, `completion_tokens`).
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

from evalkit.client.chat import ChatRequest, new_request_id
from evalkit.client.prompts import GenQuestion, filler_words
from evalkit.client.tokens import count_tokens
from evalkit.errors import UsageError

# The chat template's cost by the sim's rule: one user message (+4) and the prompt (+2).
CHAT_OVERHEAD = 6
# The longest prompt or answer a run may ask for, in tokens (2^20: the largest served contexts are ~1M tokens).
MAX_LENGTH_TOKENS = 1 << 20
_SPREAD = 9  # neighbouring values of n (see the module docstring)


@dataclass(frozen=True)
class Lengths:
    """A token length: fixed (`lo == hi`) or uniform between lo and hi, drawn from the seed."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str, flag: str) -> Lengths:
        """`N` or `LO:HI` (uniform, inclusive)."""
        m = re.fullmatch(r"\s*(\d+)\s*(?::\s*(\d+)\s*)?", text)
        if not m:
            raise UsageError(f"{flag} takes N or LO:HI (tokens), not {text!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise UsageError(f"{flag}: {hi} is below {lo}")
        if hi > MAX_LENGTH_TOKENS:
            raise UsageError(f"{flag}: {hi} tokens is over the {MAX_LENGTH_TOKENS:,}-token limit")
        return cls(lo, hi)

    def draw(self, rng: random.Random) -> int:
        """One length."""
        return self.lo if self.lo == self.hi else rng.randint(self.lo, self.hi)

    def __str__(self) -> str:
        return str(self.lo) if self.lo == self.hi else f"{self.lo}:{self.hi}"


@dataclass(frozen=True)
class Workload:
    """The request mix of a run: prompt and output lengths and the shared prefix."""

    prompt_tokens: Lengths
    output_tokens: Lengths
    prefix_tokens: int = 0
    token_scale: float = 1.0  # the server's tokens per sim-rule token (evalkit/load/tokens.py)


@dataclass(frozen=True)
class LoadRequest:
    """One request of a load point: its index, phase, prompt text and the answer it must give."""

    index: int
    prompt: str
    count_to: int
    prompt_tokens: int  # by the sim's rule times the run's token scale, template included
    output_tokens: int  # the count's answer length by the sim's rule

    def chat_request(self, id_prefix: str, reasoning_room: int, timeout_s: float) -> ChatRequest:
        """The request as sent: the prompt as the only user message, at temperature 0, with room for reasoning."""
        return ChatRequest(
            messages=[{"role": "user", "content": self.prompt}],
            max_tokens=self.max_tokens + reasoning_room,
            temperature=0.0,
            request_id=new_request_id(id_prefix),
            timeout_s=timeout_s,
        )

    @property
    def expected(self) -> str:
        """The exact answer."""
        return GenQuestion(self.count_to).answer

    @property
    def max_tokens(self) -> int:
        """Room for the whole count with a tokenizer that splits numbers more finely than the sim's."""
        return 2 * self.output_tokens + 16

    def digest(self) -> str:
        """A short hash of the prompt, for the dry-run listing."""
        return hashlib.sha256(self.prompt.encode()).hexdigest()[:12]


def filler_text(rng: random.Random, tokens: int) -> str:
    """Seeded filler sentences of exactly `tokens` tokens by the sim's rule."""
    # Each filler word is one token by the sim's rule (a word with its leading space), a full stop is one more.
    vocab = filler_words()
    out: list[str] = []
    left = tokens
    while left > 0:
        n = min(left, rng.randint(8, 16))
        if n >= 2:
            ws = [rng.choice(vocab) for _ in range(n - 1)]
            out.append(ws[0].capitalize() + "".join(" " + w for w in ws[1:]) + ".")
        else:
            out.append(rng.choice(vocab))
        left -= n
    return " ".join(out)


def shared_prefix(seed: int, tokens: int) -> str:
    """The prefix every request of the run starts with (empty for 0 tokens)."""
    return filler_text(random.Random(f"load-prefix:{seed}"), tokens) if tokens > 0 else ""


def count_for(output_tokens: int, index: int) -> int:
    """n of `Count from 1 to n` for an answer of about `output_tokens` tokens, moved by the index's neighbour."""
    base = max(1, (output_tokens + 1) // 2)
    if base > _SPREAD // 2:
        return base + index % _SPREAD - _SPREAD // 2
    return base + index % _SPREAD  # too short to move both ways: only upwards


def build_request(workload: Workload, prefix: str, key: str, index: int) -> LoadRequest:
    """Request `index` of the point named by `key` (the same key and index always give the same request)."""
    rng = random.Random(f"load-request:{key}:{index}")
    want_prompt = round(workload.prompt_tokens.draw(rng) / workload.token_scale)
    want_output = workload.output_tokens.draw(rng)
    n = count_for(want_output, index)
    question = GenQuestion(n).text
    head = (prefix + "\n\n") if prefix else ""
    fixed = count_tokens(head + question) + CHAT_OVERHEAD
    own = max(0, want_prompt - fixed)
    # Words join their neighbours' whitespace, so the count of the joined text is checked, not assumed.
    text = head + (filler_text(rng, own) + "\n\n" if own else "") + question
    return LoadRequest(
        index=index,
        prompt=text,
        count_to=n,
        prompt_tokens=round((count_tokens(text) + CHAT_OVERHEAD) * workload.token_scale),
        output_tokens=count_tokens(GenQuestion(n).answer),
    )
