"""Splitting inline reasoning from the answer."""

import pytest

from evalkit.client.thinking_text import split_inline_reasoning


@pytest.mark.parametrize(
    "text, reasoning, answer",
    [
        ("The answer is 4.", None, "The answer is 4."),
        ("<think>2+2=4</think>\n\nThe answer is 4.", "2+2=4", "The answer is 4."),
        ("  <think>\nhmm\n</think>4", "hmm", "4"),
        ("template opened it\n</think>\n\n4", "template opened it", "4"),
        ("<think>never closed, ran out of tokens", "never closed, ran out of tokens", ""),
        ("<THINK>x</THINK>y", "x", "y"),
        ("<think>a</think>b</think>c", "a</think>b", "c"),
    ],
)
def test_split(text, reasoning, answer):
    assert split_inline_reasoning(text) == (reasoning, answer)
