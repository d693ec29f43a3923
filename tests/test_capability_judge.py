"""`evalkit capability --judge-url` with `evalkit sim` as the judge, over real HTTP: only the lines the rules are
unsure of (ambiguous or unparsed) are sent, the judge's verdict sits beside the rule's grade without changing it,
the summary and the report count the disagreements; `--replay` grades every line as its own case, resumes without
counting a line twice, and names the line of an id it cannot grade."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.runs.schemas import GradedLine
from evalkit.sim.answers import judge_word
from evalkit_evals.model_judge import disagrees, needs_judge, parse_judge_prompt, read_verdict, reference_answer
from evalkit_evals.question_set import items_by_id

EVALKIT = [sys.executable, "-m", "evalkit"]
KEY = "sk-judge-secret-4f1c9a77b2"

# Several answers to one question, and answers the rules read with confidence, are unsure of, or cannot read.
ANSWERS = [
    {"id": "gsm8k:0", "content": "Half of the eggs are sold.\n#### 18"},
    {"id": "gsm8k:0", "content": "#### 20"},
    {"id": "gsm8k:0", "content": "#### 18\nWait, the answer is 20."},
    {"id": "gsm8k:0", "content": "I cannot tell."},
    {"id": "gsm8k:0", "content": "<think>It is 18.</think>No idea, sorry."},
    {"id": "gsm8k:1", "content": "The answer is 3.\n\nANSWER: 4\n\nActually 3."},
    {"id": "math500:test/precalculus/807.json", "content": "I give up."},
    {"id": "math500:test/precalculus/807.json", "content": "The final answer is $\\boxed{0}$."},
]


def _write(path: Path, answers: list[dict]) -> Path:
    path.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    return path


def _capability(*argv: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **({"JUDGE_KEY": key} if key else {})}
    return subprocess.run([*EVALKIT, "capability", *argv], capture_output=True, text=True, timeout=600, env=env)


def _replay(src: Path, out: Path, name: str, *flags: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    proc = _capability("--replay", str(src), "--out", str(out), "--name", name, *flags, key=KEY)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out / name, proc


def _lines(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "graded.jsonl").read_text().splitlines()]


def _judge_events(sim) -> dict[str, dict]:
    with urllib.request.urlopen(sim.root_url + "/sim/events", timeout=10) as r:
        return {e["request_id"]: e for e in json.load(r)["events"] if e["kind"] == "judge"}


def _judge_flags(sim) -> list[str]:
    return ["--judge-url", sim.base_url, "--judge-model", "evalkit-sim", "--judge-api-key-env", "JUDGE_KEY"]


def _no_key_in(run: Path) -> None:
    for f in run.iterdir():
        assert KEY not in f.read_text(encoding="utf-8", errors="replace"), f


def test_only_unsure_lines_go_to_the_judge_and_its_verdict_sits_beside_the_rules(sim, tmp_path: Path) -> None:
    s = sim("--port", "0", "--time-scale", "1000")
    src = _write(tmp_path / "answers.jsonl", ANSWERS)
    plain, _ = _replay(src, tmp_path, "plain")
    judged, proc = _replay(src, tmp_path, "judged", *_judge_flags(s))
    rules, lines = _lines(plain), _lines(judged)
    # One line per input line, in input order, each its own case.
    assert [(g["id"], g["replay_line"]) for g in lines] == [(a["id"], i) for i, a in enumerate(ANSWERS, 1)]
    # The judge never changes a rule's grade: every field but `judge` is as a run without a judge wrote it.
    for a, b in zip(rules, lines):
        assert {k: v for k, v in b.items() if k != "judge"} == a
    unsure = [g for g in lines if needs_judge(GradedLine.model_validate(g))]
    assert any(g["ambiguous"] for g in unsure) and any(g["outcome"] == "unparsed" for g in unsure)
    assert all(("judge" in g) == needs_judge(GradedLine.model_validate(g)) for g in lines)
    # The judge saw exactly those lines: one request each, and the verdict is what the sim's comparison gives.
    events = _judge_events(s)
    assert set(events) == {g["judge"]["request_id"] for g in unsure}
    items = items_by_id([g["id"] for g in lines], None)
    for g in unsure:
        answer = g["content"].split("</think>")[-1]  # never the reasoning
        word = judge_word(reference_answer(items[g["id"]]) or "", answer.strip(), True)
        settles = g["sure"] is False and read_verdict(word) in ("correct", "wrong")  # issue #55
        assert g["judge"] == {
            "model": "evalkit-sim",
            "verdict": read_verdict(word),
            "words": word,
            "request_id": g["judge"]["request_id"],
            **({"settles": True} if settles else {}),
        }
    summary = json.loads((judged / "summary.json").read_text())
    # The judge settles the unsure lines it can read: the sure score counts them by its verdict, not as unsure.
    settled = [g for g in lines if (g.get("judge") or {}).get("settles")]
    assert settled
    sure_right = sum(g["correct"] for g in lines if g["sure"]) + sum(
        g["judge"]["verdict"] == "correct" for g in settled
    )
    assert summary["total"]["sure_correct"] == sure_right
    assert summary["total"]["unsure"] == sum(1 for g in lines if g["sure"] is False) - len(settled)
    assert summary["total"]["total"] == len(ANSWERS)  # lines, not distinct ids
    assert summary["judge"]["sent"] == len(unsure) == len(events)
    assert summary["judge"]["disagree"] == sum(disagrees(GradedLine.model_validate(g)) for g in lines)
    assert summary["judge"]["verdicts"]["error"] == 0
    assert f"asked about {len(unsure)} of {len(ANSWERS)} lines" in proc.stdout
    manifest = json.loads((judged / "manifest.json").read_text())
    assert manifest["judge"]["model"] == "evalkit-sim"
    _no_key_in(judged)


def test_live_run_with_the_sim_as_model_and_judge_and_the_report_lists_the_disagreement(sim, tmp_path: Path) -> None:
    rows = [
        {"id": "a", "q": "Capital of France, please?", "gold": "Paris", "reply": "Answer: Paris"},
        {"id": "b", "q": "Capital of Italy, please?", "gold": "Rome", "reply": "I think it is Rome."},
        {"id": "c", "q": "Capital of Norway, please?", "gold": "Oslo", "reply": "No idea."},
        {"id": "d", "q": "Capital of Peru, please?", "gold": "Lima", "reply": "Answer: Bern"},
    ]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ev = tmp_path / "cities.toml"
    ev.write_text(
        'name = "cities"\nprompt = "{{ q }}"\nanswer = "gold"\n[dataset]\npath = "rows.jsonl"\nid_column = "id"\n'
        "[extract]\nkind = \"regex\"\npattern = 'Answer: (.+)'\n[sim]\nanswer = '{{ reply }}'\n",
        encoding="utf-8",
    )
    s = sim("--port", "0", "--time-scale", "1000", "--eval", str(ev))
    argv = ["--base-url", s.base_url, "--thinking", "off", "--eval", str(ev), "--out", str(tmp_path)]
    proc = _capability(*argv, "--name", "live", *_judge_flags(s), key=KEY)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = tmp_path / "live"
    by_id = {g["id"]: g for g in _lines(run)}
    assert {q: g["outcome"] for q, g in by_id.items()} == {
        "cities:a": "correct",
        "cities:b": "unparsed",
        "cities:c": "unparsed",
        "cities:d": "wrong",
    }
    assert "judge" not in by_id["cities:a"] and "judge" not in by_id["cities:d"]
    assert by_id["cities:b"]["judge"]["verdict"] == "correct" and by_id["cities:b"]["correct"] is False
    assert by_id["cities:c"]["judge"]["verdict"] == "wrong"
    assert set(_judge_events(s)) == {by_id[q]["judge"]["request_id"] for q in ("cities:b", "cities:c")}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["total"]["correct"] == 1  # the rules' score: the judge's "correct" on b is not counted
    assert summary["judge"]["sent"] == 2 and summary["judge"]["disagree"] == 1
    assert summary["judge"]["judge_right_rules_not"] == 1
    _no_key_in(run)
    out = tmp_path / "report.md"
    assert main(["report", str(run), "-o", str(out)]) == 0
    md = out.read_text()
    assert "| judge: lines sent / disagree with the rules | 2 / 1 |" in md
    section = md.split("### Grades to look at: ", 1)[1].split("\n### ", 1)[0]
    listed = [ln.split(" | ")[0].strip("| ") for ln in section.splitlines() if ln.startswith("| cities:")]
    assert listed == ["cities:b"]  # the one the judge and the rules disagree on
    assert "correct ≠ rules" in section and "disagrees with the rules on 1" in section


def test_report_lists_ambiguous_grades_with_both_readings(tmp_path: Path) -> None:
    src = _write(tmp_path / "answers.jsonl", ANSWERS)
    run, _ = _replay(src, tmp_path, "r")
    ambiguous = [g for g in _lines(run) if g["ambiguous"]]
    assert ambiguous, "the answers hold a later correction"
    out = tmp_path / "report.md"
    assert main(["report", str(run), "-o", str(out)]) == 0
    section = out.read_text().split("### Grades to look at: ", 1)[1].split("\n### ", 1)[0]
    rows = {ln.split(" | ")[0].strip("| "): ln for ln in section.splitlines() if ln.startswith("| ")}
    for g in ambiguous:
        row = rows[f"{g['id']} (line {g['replay_line']})"]
        assert g["rule"] in row and all(str(r["value"]) in row for r in g["readings"])
    assert f"{len(ambiguous)} ambiguous grade(s)" in section


def test_a_stopped_replay_resumes_without_counting_a_line_twice(sim, tmp_path: Path) -> None:
    src = _write(tmp_path / "answers.jsonl", ANSWERS)
    run, _ = _replay(src, tmp_path, "r")
    whole = _lines(run)
    # As if killed after three lines: the rest are graded once, in order; a finished replay started again adds none.
    (run / "graded.jsonl").write_text("".join(json.dumps(g) + "\n" for g in whole[:3]), encoding="utf-8")
    manifest = json.loads((run / "manifest.json").read_text())
    for key in ("finished", "complete", "exit_code"):  # a killed run never marked itself finished
        manifest.pop(key, None)
    (run / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    for _ in range(2):
        _replay(src, tmp_path, "r")
        assert _lines(run) == whole
        assert json.loads((run / "summary.json").read_text())["total"]["total"] == len(ANSWERS)
    other = _write(tmp_path / "other.jsonl", ANSWERS[:2])
    proc = _capability("--replay", str(other), "--out", str(tmp_path), "--name", "r")
    assert proc.returncode == 2 and "another file" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert json.loads((run / "manifest.json").read_text())["finished"]  # the refused resume left the run as it was
    s = sim("--port", "0", "--time-scale", "1000")
    proc = _capability("--replay", str(src), "--out", str(tmp_path), "--name", "r", *_judge_flags(s), key=KEY)
    assert proc.returncode == 2 and "was graded with judge None, not 'evalkit-sim'" in proc.stderr


@pytest.mark.parametrize(
    "qid, said",
    [
        ("nosuch:3", "id 'nosuch:3' names no known dataset"),
        ("gsm8k", "id 'gsm8k' names no known dataset"),
        ("gsm8k:9999999", "no question 'gsm8k:9999999' in gsm8k"),
    ],
)
def test_an_id_nothing_can_grade_is_one_line_exit_2_naming_its_line(tmp_path: Path, qid: str, said: str) -> None:
    src = tmp_path / "a.jsonl"
    src.write_text('{"id": "gsm8k:0", "content": "#### 18"}\n\n' + json.dumps({"id": qid, "content": "#### 1"}) + "\n")
    proc = _capability("--replay", str(src), "--out", str(tmp_path), "--name", "bad")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"evalkit capability: error: {src}:3: {said}")
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize(
    "flags, said",
    [
        (["--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "m"], "--judge-url: cannot reach server"),
        (["--judge-url", "http://127.0.0.1:9/v1"], "--judge-url needs --judge-model"),
        (["--judge-model", "m"], "go with --judge-url"),
        (
            ["--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "m", "--judge-api-key-env", "NO_SUCH_KEY_VAR"],
            "NO_SUCH_KEY_VAR: that environment variable is not set",
        ),
    ],
)
def test_a_judge_that_cannot_be_asked_is_one_line_exit_2_before_grading(
    tmp_path: Path, flags: list[str], said: str
) -> None:
    src = _write(tmp_path / "a.jsonl", ANSWERS[:1])
    proc = _capability("--replay", str(src), "--out", str(tmp_path), "--name", "j", *flags, key=KEY)
    assert proc.returncode == 2 and said in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and KEY not in proc.stderr
    assert not (tmp_path / "j").exists()


def test_the_sim_judge_reads_its_prompt_and_flips_at_its_error_rate(sim) -> None:
    from evalkit_evals.model_judge import judge_prompt

    assert parse_judge_prompt(judge_prompt("18", "text with {reference} in it\n#### 18")) == (
        "18",
        "text with {reference} in it\n#### 18",
    )
    assert parse_judge_prompt("What is 2 + 2? Reply with only the number.") is None
    s = sim("--port", "0", "--time-scale", "1000", "--judge-error-rate", "1.0")
    body = {
        "model": "evalkit-sim",
        "messages": [{"role": "user", "content": judge_prompt("1,200", "So the total is $1200.")}],
        "max_tokens": 16,
    }
    req = urllib.request.Request(
        s.base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        said = json.load(r)["choices"][0]["message"]["content"]
    assert judge_word("1,200", "So the total is $1200.", True) == "Yes" and said == "No"
    (event,) = _judge_events(s).values()
    assert event["fault"] == "judge_flipped"


@pytest.mark.parametrize(
    "words, verdict",
    [("Yes", "correct"), ("no.", "wrong"), ("**Unsure**", "unsure"), ("<think>yes</think>No", "wrong"), ("", "unsure")],
)
def test_read_verdict(words: str, verdict: str) -> None:
    assert read_verdict(words) == verdict


def test_a_judge_that_fails_later_marks_its_lines_and_leaves_the_rules_grades(sim, tmp_path: Path) -> None:
    s = sim("--port", "0", "--time-scale", "1000", "--fail-rate", "1.0")  # /v1/models answers, every chat is a 500
    src = _write(tmp_path / "answers.jsonl", ANSWERS)
    run, proc = _replay(src, tmp_path, "failing", *_judge_flags(s))
    judged = [g for g in _lines(run) if "judge" in g]
    assert judged and len(judged) == sum(needs_judge(GradedLine.model_validate(g)) for g in _lines(run))
    assert all(g["judge"]["verdict"] == "error" and "500" in g["judge"]["words"] for g in judged)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["judge"]["verdicts"]["error"] == len(judged) and summary["judge"]["disagree"] == 0
    assert f"the judge could not be asked about {len(judged)} line(s)" in proc.stderr
