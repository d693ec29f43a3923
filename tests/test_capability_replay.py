"""`evalkit capability --replay`: hand-written hard cases per dataset, and every dataset's own reference answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cases.capability_hard_cases import GSM8K, HUMANEVALPLUS, MATH500, MUSR
from evalkit_evals.datasets import load_items
from evalkit_evals.musr import musr_choices

EVALKIT = [sys.executable, "-m", "evalkit"]


def _replay(tmp_path: Path, answers: list[dict], name: str) -> tuple[list[dict], dict]:
    """`evalkit capability --replay` of `answers`: (graded lines, summary)."""
    return _replay_at_once(tmp_path, [answers], name)[0]


def _replay_at_once(tmp_path: Path, parts: list[list[dict]], name: str) -> list[tuple[list[dict], dict]]:
    """A replay of each part (run `{name}-{i}`), all started together; (graded lines, summary) per part, in order."""
    procs = []
    for i, part in enumerate(parts):
        src = tmp_path / f"{name}-{i}.jsonl"
        src.write_text("".join(json.dumps(a) + "\n" for a in part), encoding="utf-8")
        cmd = [*EVALKIT, "capability", "--replay", str(src), "--out", str(tmp_path), "--name", f"{name}-{i}"]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=1500)
        assert proc.returncode == 0, stderr[-2000:]
        run = Path(stdout.strip().splitlines()[-1])
        graded = [json.loads(ln) for ln in (run / "graded.jsonl").read_text().splitlines()]
        out.append((graded, json.loads((run / "summary.json").read_text())))
    return out


def test_hard_cases_through_replay(tmp_path: Path, data_dir: Path) -> None:
    he = {it.qid: it.row for it in load_items("humanevalplus", data_dir)}
    cases = GSM8K + MATH500 + MUSR + HUMANEVALPLUS
    answers = []
    for case in cases:
        qid, content = case[0], case[1]
        if qid.startswith("humanevalplus:"):
            content = content.replace("{PROMPT}", he[qid]["prompt"]).replace(
                "{CANONICAL}", he[qid]["canonical_solution"]
            )
        answers.append(
            {"id": qid, "content": content, "reasoning": None, **({"finish_reason": case[4]} if len(case) > 4 else {})}
        )
    graded, summary = _replay(tmp_path, answers, "hard")
    assert [g["id"] for g in graded] == [a["id"] for a in answers]  # one line per input line, in order
    mismatches = [(c[0], c[3], c[2], g["outcome"], g["why"]) for c, g in zip(cases, graded) if g["outcome"] != c[2]]
    assert not mismatches, "\n".join(map(str, mismatches))
    for ds in (GSM8K, MATH500, MUSR, HUMANEVALPLUS):
        assert len(ds) >= 25
    assert all(g["correct"] == (g["outcome"] == "correct") for g in graded)
    assert all(g["row_hash"] and g["dataset_revision"] for g in graded)
    bp = next(g for g in graded if g["id"] == "humanevalplus:HumanEval/53")
    assert bp["details"]["base"] == "pass" and bp["details"]["plus"] == "fail"
    assert summary["scores"]["humanevalplus"]["base_pass"] > summary["scores"]["humanevalplus"]["plus_pass"]


def test_reference_answers_all_correct(tmp_path: Path, data_dir: Path) -> None:
    """GSM8K's worked answers, MATH-500's answer boxed, MuSR's right choice (by number and by text), all 164
    canonical solutions: the 2,739 items' reference answers all grade correct, and sure (issue #55)."""
    answers = []
    for it in load_items("gsm8k", data_dir):
        answers.append({"id": it.qid, "content": it.row["answer"], "reasoning": None})
    for it in load_items("math500", data_dir):
        answers.append(
            {"id": it.qid, "content": f"The final answer is $\\boxed{{{it.row['answer']}}}$.", "reasoning": None}
        )
    for it in load_items("musr", data_dir):
        answers.append({"id": it.qid, "content": f"ANSWER: {int(it.row['answer_index']) + 1}", "reasoning": None})
        # The right choice named by its text, as models often answer: no twin, substring or spacing trap fails it.
        gold_text = musr_choices(it.row)[int(it.row["answer_index"])].strip()
        answers.append({"id": it.qid, "content": f"ANSWER: {gold_text}", "reasoning": None})
    for it in load_items("humanevalplus", data_dir):
        code = it.row["prompt"] + it.row["canonical_solution"]
        answers.append({"id": it.qid, "content": f"```python\n{code}\n```", "reasoning": "not graded"})
    # Two replays at once, one per core (grading is CPU-bound): the HumanEval+ solutions and their sandboxes in one,
    # the other datasets in the other. Each summary counts its own items; together they are every item.
    halves = [
        [a for a in answers if not a["id"].startswith("humanevalplus:")],
        [a for a in answers if a["id"].startswith("humanevalplus:")],
    ]
    graded, summaries = [], []
    for got, summary in _replay_at_once(tmp_path, halves, "reference"):
        graded += got
        summaries.append(summary)
    failed = [(g["id"], g["outcome"], g["why"][:200]) for g in graded if not g["correct"]]
    assert not failed, failed[:20]
    unsure = [(g["id"], g["readings"]) for g in graded if not g["sure"]]  # issue #55: right and sure
    assert not unsure, unsure[:20]
    items = len({a["id"] for a in answers})
    assert items == 1319 + 500 + 756 + 164 == 2739
    for half, summary in zip(halves, summaries):
        n = len(half)  # every line is its own case: MuSR's two answers to each question count twice
        assert summary["total"] == {
            "correct": n,
            "total": n,
            "ambiguous": 0,
            "outcomes": {"correct": n, "wrong": 0, "unparsed": 0, "truncated": 0, "error": 0},
            "sure_correct": n,
            "unsure": 0,
            "interval": [1.0, 1.0],
        }
    assert sum(s["total"]["total"] for s in summaries) == len(answers) == items + 756
    assert any(g["id"] == "humanevalplus:HumanEval/32" and g["correct"] for g in graded)


def test_reasoning_is_never_graded(tmp_path: Path) -> None:
    answers = [
        {"id": "gsm8k:0", "content": "I am not sure.", "reasoning": "#### 18"},
        {"id": "musr:murder_mysteries/0", "content": "Hmm.", "reasoning": "ANSWER: 1"},
        {
            "id": "humanevalplus:HumanEval/23",
            "content": "See my reasoning.",
            "reasoning": "```python\ndef strlen(string):\n    return len(string)\n```",
        },
    ]
    graded, _ = _replay(tmp_path, answers, "reasoning")
    assert [g["outcome"] for g in graded] == ["unparsed", "unparsed", "unparsed"]


@pytest.mark.parametrize(
    "body, message",
    [
        ('{"id": "gsm8k:0"}\n', "needs a string 'id' and a string 'content'"),
        ("not json\n", "not a JSON object"),
    ],
)
def test_bad_replay_file_is_exit_2(tmp_path: Path, body: str, message: str) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text(body)
    proc = subprocess.run(
        [*EVALKIT, "capability", "--replay", str(src), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_missing_dataset_is_one_line_exit_2(tmp_path: Path) -> None:
    src = tmp_path / "a.jsonl"
    src.write_text('{"id": "gsm8k:0", "content": "#### 18"}\n')
    proc = subprocess.run(
        [*EVALKIT, "capability", "--replay", str(src), "--out", str(tmp_path), "--data-dir", str(tmp_path / "nowhere")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "openai__gsm8k/test.jsonl" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
