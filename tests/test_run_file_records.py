"""One typed record per run file, used to write and to read (evalkit/runs/schemas.py): what the writers put in
`requests.jsonl`, `graded.jsonl` and a stress `summary.json` is the reader's model, every key a declared field in
the declared order (a command's own facts after them), and it validates."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from evalkit.runs.records import RequestRecord
from evalkit.runs.schemas import GradedLine, RequestLine, StressSummary
from evalkit_evals.datasets import DatasetItem
from evalkit_evals.grader import graded_line
from evalkit_evals.verdict import Reading, Verdict
from evalkit_stress.summary import build_summary

EXAMPLE_STRESS = Path(__file__).resolve().parent.parent / "results" / "examples" / "demo" / "after-stress"


def _declared_prefix(written: list[str], model: type[BaseModel]) -> list[str]:
    """The written keys up to the first extra, which must be the model's fields in its order."""
    fields = list(model.model_fields)
    head = [k for k in written if k in fields]
    assert head == written[: len(head)], f"a {model.__name__} field written after an extra key: {written}"
    assert head == [f for f in fields if f in head], f"{model.__name__} fields out of order: {head}"
    return head


def test_a_request_line_is_a_request_line_model() -> None:
    rec = RequestRecord(request_id="r", t_sent=10.0, tags={"cycle": 2, "scenario": "short_insert"})
    rec.chunk_times += [10.5, 10.6, 10.7]
    rec.t_first_token, rec.t_done, rec.completion_tokens, rec.content = 10.5, 10.8, 3, "42"
    for line in (rec.to_json(), rec.to_json(with_chunk_times=True)):
        head = _declared_prefix(list(line), RequestLine)
        assert set(line) - set(head) == {"cycle", "scenario"}  # the labels, after every field
        assert RequestLine.model_validate(line).ttft_s == 0.5
    assert "chunk_times" not in rec.to_json() and rec.to_json(with_chunk_times=True)["chunk_times"] == [
        10.5,
        10.6,
        10.7,
    ]


def test_a_graded_line_is_a_graded_line_model() -> None:
    item = DatasetItem("gsm8k:3", "gsm8k", "test", 3, {"question": "q", "answer": "#### 4"})
    for verdict in (
        Verdict("correct", "4", "read 4", rule="gsm8k.final"),
        Verdict("wrong", "5", "two readings", rule="gsm8k.final", readings=(Reading("a", "5"), Reading("b", "4"))),
    ):
        line = graded_line(
            item, verdict, "rev1", request_id="req-1", finish_reason="stop", prompt="p", note="n"
        ).to_json()
        head = _declared_prefix(list(line), GradedLine)
        assert set(line) - set(head) == {"note"}  # a caller's own fact, after every field
        assert ("readings" in line) == verdict.ambiguous
        read = GradedLine.model_validate(line)
        assert read.correct is verdict.correct and read.finish_reason == "stop" and read.prompt == "p"


def test_a_stress_summary_is_the_stress_summary_model() -> None:
    manifest = json.loads((EXAMPLE_STRESS / "manifest.json").read_text())
    written = json.loads((EXAMPLE_STRESS / "summary.json").read_text())
    summary = build_summary(EXAMPLE_STRESS, written["seed"], written["cycles_planned"], written["options"], None)
    assert isinstance(summary, StressSummary) and manifest["kind"] == "stress"
    line = summary.to_json()
    # every field, in order, nothing else; `until_sure` is added by a --until-sure run (stress/measure.py) alone
    assert list(line) == [f for f in StressSummary.model_fields if f != "until_sure"]
    # Recomputed from the example's files, it says what the example's summary says.
    assert {k: line[k] for k in ("seed", "cycles", "requests", "errors", "wrong_answers")} == {
        k: written[k] for k in ("seed", "cycles", "requests", "errors", "wrong_answers")
    }
    assert line["metrics"].keys() == written["metrics"].keys()
    StressSummary.model_validate(written)
