"""Where an answer ends (issue #55, item 4): an end of turn ends it, and a loop is read up to where it starts.

- Text after a chat template's end-of-turn token (`<|im_end|>`, `<|eot_id|>`, `<|end|>`, `</s>`, `<|endoftext|>`,
  `<end_of_turn>`, `<|end_of_text|>`, `<｜end▁of▁sentence｜>`, `<|return|>`) is never graded: a server that leaks the
  token and keeps generating writes a new turn after it. gpt-oss's `<|end|>` between its analysis and final channels
  is read by `reading_order.final_channel` first, so only the final channel's own end cuts it.
- Text that repeats until the length limit (the same unit, at least 3 times, to the last character) is read up to
  the loop: the text before it and the unit once.
"""

from __future__ import annotations

import re

END_OF_TURN = (
    "<|im_end|>",
    "<|eot_id|>",
    "<|end|>",
    "</s>",
    "<|endoftext|>",
    "<end_of_turn>",
    "<|end_of_text|>",
    "<｜end▁of▁sentence｜>",
    "<|end▁of▁sentence|>",
    "<|return|>",
)
_EOT = re.compile("|".join(re.escape(t) for t in END_OF_TURN))
# Harmony's channel switch: `<|end|>` followed by the next message of the same turn is no end of turn.
_HARMONY_NEXT = re.compile(r"\s*<\|start\|>\s*assistant")
MIN_REPEATS = 3
MAX_UNIT = 2000
MIN_LOOP_CHARS = 60


def end_of_turn(text: str) -> str:
    """The text up to its first end-of-turn token (a harmony channel switch is not one)."""
    for m in _EOT.finditer(text):
        if m.group() == "<|end|>" and _HARMONY_NEXT.match(text, m.end()):
            continue
        return text[: m.start()]
    return text


def loop_start(text: str) -> int | None:
    """Where a loop running to the end of `text` starts (its unit kept once), or None when the text ends in none:
    the shortest unit that repeats at least `MIN_REPEATS` times up to the last character (a partial last copy
    allowed), over at least `MIN_LOOP_CHARS` characters."""
    n = len(text)
    for unit in range(1, min(MAX_UNIT, n // MIN_REPEATS) + 1):
        span = max(MIN_REPEATS * unit, MIN_LOOP_CHARS)
        if span > n or text[n - span : n - unit] != text[n - span + unit : n]:
            continue
        start = n - span
        while start >= unit and text[start - unit : start] == text[start : start + unit]:
            start -= unit
        while start > 0 and text[start - 1] == text[start - 1 + unit]:
            start -= 1
        if not text[start : start + unit].strip():
            return None  # trailing whitespace is no loop
        return start + unit
    return None


def up_to_loop(text: str) -> str:
    """The text read up to a loop that runs to its end (unchanged when there is none)."""
    cut = loop_start(text)
    return text if cut is None else text[:cut]
