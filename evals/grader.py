"""One entry point for judging an answer to any item: ask the item's eval (`registry`), apply the truncation rule,
and build the `graded.jsonl` line. Reasoning is never given to a grader: an inline `<think>...</think>` block in the
content is split off here, for every dataset and in both live runs and `--replay`, so only the text after the last
`</think>` is graded, and of that the gpt-oss `final` channel when the channels arrive as plain text
(`reading_order.py` documents the order every reader follows)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from evalkit.client.thinking_text import split_inline_reasoning
from evalkit.runs.schemas import GradedLine
from evalkit_evals import readers, registry
from evalkit_evals.answer_end import end_of_turn, up_to_loop
from evalkit_evals.datasets import DatasetItem
from evalkit_evals.math_judge import MathJudge
from evalkit_evals.protocol import Judges
from evalkit_evals.reading_order import final_channel
from evalkit_evals.verdict import Verdict

if TYPE_CHECKING:
    from evalkit_evals.code_judge import CodeJudge

_TOKEN = re.compile(r"\s*\w+|\s*[^\w\s]")
# The most of an answer any reader is given (docs/conventions.md, "Bounds"): far above a real answer (32K tokens
# are ~128 KB), far below what the readers' own costs can take (evalplus's sanitizer tries every span of lines: a
# 20 MB answer was never graded). Past it the answer is `unparsed`, never read.
MAX_ANSWER_CHARS = 1 << 20
MAX_CODE_LINES = 1000  # an answer whose code is run: the sanitizer takes ~6 s at 1,000 lines


class Grader:
    """Grades answers; holds what the run's evals judge with (`protocol.Judges`: the math-verify worker, the code
    sandbox, per-run task data). Close it at the end."""

    def __init__(self, data_dir: str | Path | None, code_judge: CodeJudge | None = None) -> None:
        self.data_dir = data_dir
        self.code_judge = code_judge  # None: no item whose eval runs code may be graded (the run chose no isolation)
        self.judges = Judges(data_dir, MathJudge(), code_judge)

    def grade(self, item: DatasetItem, content: str, finish_reason: str | None = None) -> Verdict:
        """Judge the answer text after the last `</think>` (never the reasoning). A cut-off answer that is not
        right is `truncated`."""
        _, answer = split_inline_reasoning(content or "")
        answer = final_channel(end_of_turn(answer))  # step 1 of `reading_order`: the final channel, never the analysis
        answer = end_of_turn(answer)  # text after an end-of-turn token is never graded (`answer_end`)
        if finish_reason == "length":
            answer = up_to_loop(answer)  # a loop to the length limit is read up to where it starts
        too_long = _too_long(item, answer)
        if too_long is not None:
            return Verdict("unparsed", None, too_long, rule="grader.too_long", sure=True)
        try:
            verdict = readers.judged(item, answer, self._grade(item, answer), self.judges)
        except Exception as e:  # noqa: BLE001 - a grader failure is this question's `error`, not the run's
            verdict = Verdict("error", None, f"grader failed: {type(e).__name__}: {e}", rule="grader.error", sure=True)
        if finish_reason == "length" and verdict.outcome != "correct":
            verdict = replace(
                verdict, outcome="truncated", why=f"answer cut at max_tokens (finish_reason length); {verdict.why}"
            )
        return verdict

    def _grade(self, item: DatasetItem, content: str) -> Verdict:
        return registry.get(item.dataset).grade(item, content, self.judges)

    def close(self) -> None:
        """Stop the math-verify worker and the reference sandbox."""
        self.judges.math.close()
        if self.code_judge is not None:
            self.code_judge.close()


def _too_long(item: DatasetItem, answer: str) -> str | None:
    """Why the answer is past the readers' bound, or None."""
    if len(answer) > MAX_ANSWER_CHARS:
        return f"answer of {len(answer)} characters, over the {MAX_ANSWER_CHARS}-character bound: not read"
    lines = answer.count("\n") + 1
    if lines > MAX_CODE_LINES and registry.get(item.dataset).runs_code:
        return f"answer of {lines} lines, over the {MAX_CODE_LINES}-line bound of code that is run: not read"
    return None


class TokenCounts(TypedDict):
    """A graded line's token figures (`token_counts`)."""

    reasoning_tokens: int
    answer_tokens: int
    token_count_source: str


def token_counts(content: str, reasoning: str | None, content_chunks: int, reasoning_chunks: int) -> TokenCounts:
    """Reasoning and answer tokens: chunk counts when reasoning came in its own field (one chunk is one token on
    llama.cpp, vLLM and the sim); when it came inline in `<think>` tags, the reasoning part is estimated from its
    text and the rest of the content chunks are the answer's."""
    if reasoning_chunks or not reasoning:
        return {"reasoning_tokens": reasoning_chunks, "answer_tokens": content_chunks, "token_count_source": "chunks"}
    est = len(_TOKEN.findall(reasoning))
    return {
        "reasoning_tokens": est,
        "answer_tokens": max(0, content_chunks - est),
        "token_count_source": "estimated from inline reasoning text",
    }


def graded_line(item: DatasetItem, verdict: Verdict, revision: str | None, **extra: Any) -> GradedLine:
    """The `graded.jsonl` line (`GradedLine`; `to_json()` is the line as written): contract fields first, then
    provenance and whatever the caller adds."""
    given = {
        "id": item.qid,
        "dataset": item.dataset,
        "correct": verdict.correct,
        "outcome": verdict.outcome,
        "extracted": verdict.extracted,
        "why": verdict.why,
        "rule": verdict.rule,
        "ambiguous": verdict.ambiguous,
        "sure": verdict.sure,
        "details": verdict.details,
        "dataset_revision": revision,
        "row_hash": item.row_hash,
        **extra,
    }
    if verdict.every:  # every reader's reading (issue #55); the rules' disagreeing pair where no reader ran
        given["readings"] = [r.to_json() for r in verdict.every]
    elif verdict.ambiguous:
        given["readings"] = [r.to_json() for r in verdict.readings]
    return GradedLine.model_validate(given)  # in GradedLine's order, the caller's extras last


def inline_reasoning(content: str | None) -> str | None:
    """The reasoning written inline in `<think>` tags inside the content, or None."""
    return split_inline_reasoning(content or "")[0]
