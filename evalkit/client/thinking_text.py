"""Separating reasoning from the answer when a server writes it inline with `<think>` tags."""

from __future__ import annotations

import re

_OPEN = re.compile(r"^\s*<think>", re.IGNORECASE)
_CLOSE = "</think>"


def split_inline_reasoning(text: str) -> tuple[str | None, str]:
    """Return (reasoning, answer) for text that may hold `<think>...</think>` or only a closing `</think>`.

    A closing tag alone happens when the chat template itself opened the block. An unclosed `<think>` means
    the model never finished thinking: everything is reasoning and the answer is empty.
    """
    low = text.lower()
    close_at = low.rfind(_CLOSE)
    if close_at >= 0:
        head = text[:close_at]
        head = _OPEN.sub("", head, count=1)
        return head.strip(), text[close_at + len(_CLOSE) :].lstrip()
    m = _OPEN.match(text)
    if m:
        return text[m.end() :].strip(), ""
    return None, text
