"""The one order in which an answer is read, shared by the datasets where it applies (GSM8K, MATH-500, MuSR and
the user evals that reuse their readers):

1. the final channel: the text after the last `</think>` (`grader.py`), and of that the gpt-oss `final` channel
   when the analysis and final channels arrive as plain text (`<|channel|>final<|message|>`, `assistantfinal`);
2. an explicit final marker (`####`, `\\boxed{}`, `ANSWER:`, "final answer", "the answer is", a JSON `answer`
   key, a table row or heading labelled "answer"; a label alone on its line labels the next line);
3. bold in the final statement; 4. an answer given first and explained after; 5. the final statement line.
Lines that only check or verify ("Check:", "Let me double-check", "Verification:") and closing pleasantries are
never the final statement. After the answer, a correction that names another value ("Wait — it is 12") makes the
grade `ambiguous` with both readings (the grade follows the correction, the model's last word); a retraction with
no new answer ("Wait, that's not right.") leaves no answer (`unparsed`).
"""

from __future__ import annotations

import json
import re

# gpt-oss's harmony channels as plain text: with its special tokens, or with them stripped by the server.
_FINAL_CHANNEL = re.compile(r"<\|channel\|>\s*final\s*<\|message\|>|(?:^|<\|end\|>|[.!?\s])assistantfinal", re.I)
_HARMONY_TOKENS = re.compile(r"<\|(?:return|end|call|start|channel|message)\|>(?:assistant)?")

CHECK_LINE = re.compile(
    r"^\W*(?:(?:let me|let['’]s|let us|i(?:['’]ll| will)|we can|now,?|quick(?:ly)?|to)\s+)?"
    r"(?:check(?:ing)?|verif(?:y|ying|ication|ied)|double[- ]?check(?:ing)?|sanity[- ]check|proof|confirm(?:ing)?\b"
    r"(?!,? the answer))\b",
    re.IGNORECASE,
)
PLEASANTRY = re.compile(
    r"^\W*(?:i hope|hope (?:this|that)|let me know|feel free|happy to|glad to|good luck|"
    r"thanks?\b|thank you|enjoy|have a (?:great|nice|good)|if you have any)",
    re.IGNORECASE,
)
# A later line that replaces the answer with another value without retracting it in words first.
CORRECTION = re.compile(
    r"(?:^|\n)\W*(?:wait|actually|correction|oops|hmm+|no)\b[\s,.:;!—–-]*"
    r"(?:(?:it|that)(?:['’]s| is| should be)|the (?:correct |right |real )?answer is|make that|i mean|"
    r"it should be)\s+(?!not\b|wrong\b|incorrect\b|right\b|correct\b)(?P<value>[^\n]+)",
    re.IGNORECASE,
)
# Words that withdraw the answer just given ("wait, that's not right", "scratch that").
RETRACTION = re.compile(
    r"\b(?:(?:that|this)(?:\s+(?:draft|attempt|guess|answer))?(?:['’]s| is| was) "
    r"(?:not right|wrong|incorrect|not correct)|"
    r"that can(?:['’]|no)t be right|i made (?:a|an) (?:mistake|error)|scratch that|no,? wait|"
    r"actually,? no\b)",
    re.IGNORECASE,
)


def final_channel(text: str) -> str:
    """The gpt-oss `final` channel's message when the channels arrive as plain text, else the text unchanged."""
    hits = list(_FINAL_CHANNEL.finditer(text))
    if not hits:
        return text
    return _HARMONY_TOKENS.sub("", text[hits[-1].end() :]).strip()


def closing_line(line: str) -> bool:
    """Whether a line only checks the answer or closes politely (never the final statement)."""
    return bool(CHECK_LINE.search(line) or PLEASANTRY.match(line))


def correction(text: str) -> re.Match[str] | None:
    """The last correction line in `text` ("Wait — it is 12."), or None."""
    hits = list(CORRECTION.finditer(text))
    return hits[-1] if hits else None


_JSON_ANSWER = re.compile(r'"(?:final_?)?answer"\s*:\s*("(?:[^"\\]|\\.)*"|-?[\d.]+)', re.IGNORECASE)
# The line after an answer given first that says the rest explains it.
EXPLANATION = re.compile(
    r"^\W*(?:explanation|here['’]?s (?:how|why)|here is (?:how|why)|reasoning|why\b|because)", re.IGNORECASE
)


def json_answer(text: str) -> str | None:
    """The value of the last JSON `"answer"` key in the text (`{"answer": 42}`), as text, or None."""
    hits = list(_JSON_ANSWER.finditer(text))
    if not hits:
        return None
    try:
        return str(json.loads(hits[-1].group(1)))
    except ValueError:
        return None


def without_closing(text: str) -> str:
    """The text without its trailing check, verification and pleasantry lines."""
    lines = text.rstrip().splitlines()
    while len(lines) > 1 and (not lines[-1].strip() or closing_line(lines[-1])):
        lines.pop()
    return "\n".join(lines)
