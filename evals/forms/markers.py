"""Marker forms: where the final answer stands (`ANSWER:`, `####`, "The answer is", Minerva's closing line, bold,
`\\boxed{}` nested, several or in prose, a table row, a heading, JSON, an answer given first), after a few lines
of working."""

from __future__ import annotations

import json

from evalkit_evals.forms.form import Form, Subject, kinds


def work(s: Subject) -> str:
    """Lines of working that restate other numbers (never the answer)."""
    a, b = s.work
    return f"First, {a} groups of {b} make {a * b}.\nThen we take the remaining step carefully."


def inline(s: Subject, v: str) -> str:
    """The value as it stands in prose: LaTeX between `$` signs."""
    return f"${v}$" if s.kind == "math" and not v.startswith("$") else v


def in_box(v: str) -> str:
    """The value as it stands inside `\\boxed{}` (a LaTeX-delimited number loses its dollars)."""
    if v.startswith("$") and v.endswith("$") and len(v) > 1:
        return v[1:-1]
    return "\\" + v if v.startswith("$") else v  # a currency sign inside LaTeX is `\$`


def _json(s: Subject, v: str) -> str:
    value: object = v
    if s.kind == "number" and v.lstrip("-").isdigit():
        value = int(v)
    return f"{work(s)}\n\n```json\n{json.dumps({'answer': value}, ensure_ascii=False)}\n```"


NUM_MATH = kinds("number", "math")
MARKERS: tuple[Form, ...] = (
    Form("answer_colon", "marker", NUM_MATH, lambda s, v: f"{work(s)}\n\nANSWER: {inline(s, v)}", example="ANSWER: 42"),
    Form("hash_line", "marker", kinds("number"), lambda s, v: f"{work(s)}\n#### {v}", example="#### 42"),
    Form(
        "answer_is",
        "marker",
        NUM_MATH,
        lambda s, v: f"{work(s)}\n\nThe answer is {inline(s, v)}.",
        example="The answer is 42.",
    ),
    Form(
        "minerva",
        "marker",
        NUM_MATH,
        lambda s, v: f"{work(s)}\n\nFinal Answer: The final answer is ${in_box(v)}$. I hope it is correct.",
        example="Final Answer: The final answer is $42$. I hope it is correct.",
    ),
    Form(
        "final_answer_colon",
        "marker",
        NUM_MATH,
        lambda s, v: f"{work(s)}\n\nFinal answer: {inline(s, v)}",
        example="Final answer: 42",
    ),
    Form(
        "bold_first",
        "marker",
        NUM_MATH,
        lambda s, v: f"**{inline(s, v)}**\n\nExplanation: {work(s)}",
        example="**42**\\n\\nExplanation: ...",
    ),
    Form(
        "bold_last",
        "marker",
        NUM_MATH,
        lambda s, v: f"{work(s)}\n\nSo the result is **{inline(s, v)}**.",
        example="So the result is **42**.",
    ),
    Form("boxed", "marker", NUM_MATH, lambda s, v: f"{work(s)}\n\n$\\boxed{{{in_box(v)}}}$", example="$\\boxed{42}$"),
    Form(
        "boxed_nested",
        "marker",
        NUM_MATH,
        lambda s, v: f"{work(s)}\n\n$\\boxed{{\\boxed{{{in_box(v)}}}}}$",
        example="$\\boxed{\\boxed{42}}$",
    ),
    Form(
        "boxed_several",
        "marker",
        NUM_MATH,
        lambda s, v: (
            f"First, {s.work[0]} groups of {s.work[1]} make $\\boxed{{{s.work[0] * s.work[1]}}}$.\n"
            f"Then the remaining step gives the final answer $\\boxed{{{in_box(v)}}}$."
        ),
        example="... make $\\boxed{63}$ ... the final answer $\\boxed{42}$.",
    ),
    Form(
        "boxed_in_prose",
        "marker",
        NUM_MATH,
        lambda s, v: f"{work(s)} So the total comes to $\\boxed{{{in_box(v)}}}$ in the end, as required.",
        example="So the total comes to $\\boxed{42}$ in the end, as required.",
    ),
    Form(
        "table_row",
        "marker",
        NUM_MATH,
        lambda s, v: (
            f"{work(s)}\n\n| step | value |\n|---|---|\n| groups | {s.work[0] * s.work[1]} |\n"
            f"| **Final answer** | {inline(s, v)} |"
        ),
        example="| **Final answer** | 42 |",
    ),
    Form(
        "heading",
        "marker",
        NUM_MATH,
        lambda s, v: f"{work(s)}\n\n## Final Answer\n\n{inline(s, v)}",
        example="## Final Answer\\n\\n42",
    ),
    Form("json", "marker", NUM_MATH, _json, example='{"answer": 42}'),
    Form(
        "answer_first",
        "marker",
        NUM_MATH,
        lambda s, v: f"The answer is {inline(s, v)}.\n\nHere's how: {work(s)}",
        example="The answer is 42.\\n\\nHere's how: ...",
    ),
    Form(
        "last_line",
        "marker",
        NUM_MATH,
        lambda s, v: f"{work(s)}\nSo the result is {inline(s, v)}.",
        example="So the result is 42.",
    ),
)
