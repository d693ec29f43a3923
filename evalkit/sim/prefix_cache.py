"""The sim's prefix cache: block-hash based with an LRU of a given size in blocks (vLLM's automatic prefix caching).

A chat prompt is the token sequence `<|im_start|> role <content tokens> <|im_end|> \\n` per message, then
`<|im_start|> assistant` (the sim's cost rule, evalkit/client/tokens.py: content + 4 per message, plus 2). It is cut
into full blocks of `--prefix-block-tokens`; block i's hash chains the hash of block i - 1 with its own tokens, so a
block is hit only when everything before it matches too. A request's hit is its leading blocks found in the cache,
at most the prompt less one token (a server always computes the last prompt token to sample the first answer).
When a prefill ends its prompt's blocks are stored; when an answer ends, the blocks of prompt + answer are stored, so
a conversation's next turn (the history with that answer) hits what its previous turn left. Blocks are evicted
least recently used (a lookup or a store makes a block recent, its prefix's head most recent of all) once the cache
holds more than its size.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from evalkit.client.tokens import message_text, tokenize
from evalkit.sim.chat_message import ChatMessage

IM_START, IM_END = "<|im_start|>", "<|im_end|>"


def chat_token_sequence(messages: list[ChatMessage]) -> list[str]:
    """The prompt's tokens as the sim's template lays them out (its length is `prompt_tokens(messages)`)."""
    out: list[str] = []
    for m in messages:
        out += [IM_START, str(m.get("role", "user"))]
        out += tokenize(message_text(m.get("content")))
        out += [IM_END, "\n"]
    return out + [IM_START, "assistant"]


def block_hashes(tokens: Sequence[str], block_tokens: int) -> list[int]:
    """The chained hash of every full block of `tokens`."""
    hashes: list[int] = []
    h = 0
    for i in range(0, len(tokens) - block_tokens + 1, block_tokens):
        h = hash((h, tuple(tokens[i : i + block_tokens])))
        hashes.append(h)
    return hashes


@dataclass
class PrefixCache:
    """An LRU of block hashes; counts the prompt tokens looked up and the tokens hit (vLLM's two counters)."""

    capacity_blocks: int
    block_tokens: int
    queries_tokens: int = 0
    hits_tokens: int = 0
    _lru: OrderedDict[int, None] = field(default_factory=OrderedDict)

    def lookup(self, hashes: list[int], prompt_tokens: int) -> int:
        """Prompt tokens served from the cache for a prompt with these block hashes; the hit blocks become recent."""
        n = 0
        for h in hashes:
            if h not in self._lru:
                break
            n += 1
        self._touch(hashes[:n])
        hit = min(n * self.block_tokens, ((prompt_tokens - 1) // self.block_tokens) * self.block_tokens)
        self.queries_tokens += prompt_tokens
        self.hits_tokens += max(0, hit)
        return max(0, hit)

    def store(self, hashes: list[int]) -> None:
        """Keep these blocks (most recent last), evicting the least recently used beyond the capacity."""
        self._touch(hashes)
        while len(self._lru) > self.capacity_blocks:
            self._lru.popitem(last=False)

    def _touch(self, hashes: list[int]) -> None:
        # Last block first, so a prefix's head is the most recent: eviction takes a chain's tail before its head,
        # as vLLM frees a request's blocks tail first (a cut head would make every later block useless).
        for h in reversed(hashes):
            self._lru[h] = None
            self._lru.move_to_end(h)

    def clear(self) -> None:
        """Forget every block (`POST /reset_prefix_cache`); the counters keep counting."""
        self._lru.clear()

    @property
    def blocks(self) -> int:
        """Blocks held now."""
        return len(self._lru)
