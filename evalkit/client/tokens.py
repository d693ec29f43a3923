"""The sim's deterministic token rule, shared with every part of evalkit that predicts token counts.

A text's tokens are `re.findall(r"\\s*\\w+|\\s*[^\\w\\s]", text)`: a word with its leading whitespace, or one
punctuation character with its leading whitespace. Whitespace at the very end of a text belongs to no token.
A chat prompt costs the sum over messages of (tokens(content) + 4), plus 2. `<think>` and `</think>` are single
(special) tokens when the sim streams them.
"""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]")
PER_MESSAGE = 4
PER_PROMPT = 2


def tokenize(text: str) -> list[str]:
    """The text's tokens (each keeps its leading whitespace)."""
    return _TOKEN.findall(text)


def count_tokens(text: str) -> int:
    """How many tokens the text holds."""
    return sum(1 for _ in _TOKEN.finditer(text))


def message_text(content: Any) -> str:
    """A message's text, also for OpenAI's list-of-parts content."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """The prompt cost of a chat: sum of (tokens(content) + 4) over messages, plus 2."""
    return sum(count_tokens(message_text(m.get("content"))) + PER_MESSAGE for m in messages) + PER_PROMPT
