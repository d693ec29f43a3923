"""Whether a request turns thinking on, how long the reasoning is, and the reasoning text itself.

On: `chat_template_kwargs.enable_thinking: true`, `reasoning_effort` low/medium/high, or a system message holding
`/think`. Off: `enable_thinking: false`, `reasoning_effort: "none"`, or `/no_think`. Otherwise `--default-thinking`.
Checked in that order. Reasoning length scales with effort: low ~60 tokens, medium ~150, high ~300 (medium when
no effort is named).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import cycle, islice
from typing import Any

from evalkit.client.tokens import message_text, tokenize

EFFORT_TOKENS = {"low": 60, "medium": 150, "high": 300}
_REASONING = (
    "Okay, let me think about what is being asked here. I should restate the question, pick out the numbers and "
    "names that matter, try one approach, and check it against the details before I commit to an answer."
)
_REASONING_TOKENS = tokenize(" " + _REASONING)


@dataclass(frozen=True)
class Thinking:
    """The request's thinking decision."""

    on: bool
    effort: str | None = None

    @property
    def budget(self) -> int:
        """Reasoning tokens the sim writes."""
        return EFFORT_TOKENS.get(self.effort or "medium", 150) if self.on else 0


def decide(body: dict[str, Any], default_on: bool) -> Thinking:
    """Thinking on or off for one request body."""
    effort = body.get("reasoning_effort")
    kwargs = body.get("chat_template_kwargs") or {}
    if isinstance(kwargs, dict) and isinstance(kwargs.get("enable_thinking"), bool):
        on = kwargs["enable_thinking"]
        return Thinking(on, effort if on and effort in EFFORT_TOKENS else None)
    if effort in EFFORT_TOKENS:
        return Thinking(True, effort)
    if effort == "none":
        return Thinking(False)
    for m in body.get("messages") or []:
        if isinstance(m, dict) and m.get("role") == "system":
            text = message_text(m.get("content"))
            if "/no_think" in text:
                return Thinking(False)
            if "/think" in text:
                return Thinking(True)
    return Thinking(default_on)


def reasoning_tokens(n: int) -> list[str]:
    """n tokens of reasoning text."""
    toks = list(islice(cycle(_REASONING_TOKENS), n))
    if toks:
        toks[0] = toks[0].lstrip()
    return toks
