"""`evalkit report` on capability runs against `evalkit sim` over real HTTP: the questions that changed are exactly
those the two graded.jsonl imply, runs over different questions (or prompts, or with errors) get no verdict, and
`--repeats` gives pass@1 as the mean of per-question mean scores."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.cli import main
from evalkit.sim.launch import start_sim

EVALKIT = [sys.executable, "-m", "evalkit"]
DATASETS = "gsm8k,musr"  # the fastest to grade; MATH-500 and HumanEval+ add grading time and no new report path


def _capability(base_url: str, out: Path, name: str, *flags: str) -> subprocess.Popen:
    thinking = [] if "--thinking" in flags else ["--thinking", "off"]
    return subprocess.Popen(
        [
            *EVALKIT,
            "capability",
            "--base-url",
            base_url,
            "--out",
            str(out),
            "--name",
            name,
            *thinking,
            "--concurrency",
            "4",
            *flags,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finished(proc: subprocess.Popen) -> Path:
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-2000:]
    return Path(stdout.strip().splitlines()[-1])


def _graded(run: Path) -> list[dict]:
    return [json.loads(ln) for ln in (run / "graded.jsonl").read_text().splitlines()]


def _report(tmp: Path, *args: str) -> str:
    out = tmp / "report.md"
    assert main(["report", *args, "-o", str(out)]) == 0
    return out.read_text()


def _rows(md: str, title_start: str) -> list[list[str]]:
    """Data rows of every markdown table whose `### ` title starts with `title_start`."""
    rows, inside = [], False
    for line in md.splitlines():
        if line.startswith("### "):
            inside = line[4:].startswith(title_start)
        elif inside and line.startswith("| ") and not line.startswith("| ---"):
            rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Two sims at accuracy 0.9 with different seeds; full runs of three datasets and smaller ones."""
    out = tmp_path_factory.mktemp("caprep")
    sims = [start_sim(["--port", "0", "--time-scale", "1000", "--accuracy", "0.9", "--seed", s]) for s in ("1", "2")]
    try:  # all at once: each spends most of its time starting up and waiting on the sim
        procs = {
            "a": _capability(sims[0].base_url, out, "a", "--datasets", DATASETS),
            "b": _capability(sims[1].base_url, out, "b", "--datasets", DATASETS),
            "b_limit": _capability(sims[1].base_url, out, "b_limit", "--datasets", DATASETS, "--limit", "5"),
            "b_two": _capability(sims[1].base_url, out, "b_two", "--datasets", "gsm8k"),
            "rep": _capability(
                sims[0].base_url,
                out,
                "rep",
                "--datasets",
                "gsm8k,musr",
                "--limit",
                "8",
                "--repeats",
                "3",
                "--temperature",
                "0.8",
            ),
            "think": _capability(
                sims[0].base_url,
                out,
                "think",
                "--thinking",
                "low",
                "--datasets",
                "gsm8k",
                "--limit",
                "6",
                "--max-tokens",
                "2000",
            ),
        }
        yield {k: _finished(p) for k, p in procs.items()}
    finally:
        for s in sims:
            s.stop()


def test_report_lists_exactly_the_flipped_questions(runs: dict[str, Path], tmp_path: Path) -> None:
    ga, gb = ({g["id"]: g for g in _graded(runs[k])} for k in ("a", "b"))
    assert set(ga) == set(gb) and len(ga) == 70
    implied = {
        q: ("right→wrong" if ga[q]["correct"] else "wrong→right") for q in ga if ga[q]["correct"] != gb[q]["correct"]
    }
    assert len(implied) >= 3  # two independent draws at 0.9 differ on ~13 of 70
    changes = tmp_path / "changes.jsonl"
    md = _report(tmp_path, str(runs["a"]), str(runs["b"]), "--labels", "seed1,seed2", "--changed-only", str(changes))
    listed = {r[0]: r for r in _rows(md, "Changed questions") if r[0] != "(none)" and r[0] != "question"}
    assert {q: r[1] for q, r in listed.items()} == implied
    for q, r in listed.items():  # both extracted answers and outcomes
        assert r[2] == f"{ga[q]['extracted'] if ga[q]['extracted'] is not None else '–'} ({ga[q]['outcome']})"
        assert r[3] == f"{gb[q]['extracted'] if gb[q]['extracted'] is not None else '–'} ({gb[q]['outcome']})"
    exported = [json.loads(ln) for ln in changes.read_text().splitlines()]
    assert {e["id"]: e["change"] for e in exported} == {
        q: "right_to_wrong" if d == "right→wrong" else "wrong_to_right" for q, d in implied.items()
    }
    assert all(e["comparable"] and e["before"]["label"] == "seed1" and e["after"]["label"] == "seed2" for e in exported)
    for e in exported:  # each side says why it was graded so, as graded.jsonl does
        assert e["before"]["why"] == [ga[e["id"]]["why"]] and e["after"]["why"] == [gb[e["id"]]["why"]]
        assert e["before"]["extracted"] == [ga[e["id"]]["extracted"]]
    # Per dataset: each changed table's ids belong to its dataset, and its title counts them.
    for ds in DATASETS.split(","):
        mine = [q for q in implied if q.startswith(ds + ":")]
        if mine:
            lost = sum(implied[q] == "right→wrong" for q in mine)
            assert f"({lost} right→wrong, {len(mine) - lost} wrong→right)" in md
    scores = {r[0]: r for r in _rows(md, "Capability, thinking off")}
    assert "not comparable" not in md
    assert scores["total"][2][-1] in "▲▼≈"
    answering = {r[0]: r for r in _rows(md, "How the model answered, thinking off: seed2")}
    assert set(answering) >= {"gsm8k", "musr", "all"}
    assert answering["all"][3] == "0%"  # truncated: the sim finishes every answer
    assert float(answering["all"][5]) > 0 and float(answering["all"][6]) > 0  # TTFT and decode tok/s seen


@pytest.mark.parametrize("other", ["b_limit", "b_two"])
def test_different_questions_are_not_comparable(runs: dict[str, Path], tmp_path: Path, other: str) -> None:
    md = _report(tmp_path, str(runs["a"]), str(runs[other]))
    scores = {r[0]: r for r in _rows(md, "Capability, thinking off")}
    assert scores["total"][2].endswith("not comparable")
    assert not any(c[-1] in "▲▼≈" for r in scores.values() for c in r[2:])  # no verdict anywhere
    assert "not comparable, no verdict: they graded different questions" in md


@pytest.mark.parametrize(
    "edit, reason",
    [
        ("prompt", "different prompt templates (musr)"),
        ("error", "has 1 error outcome(s)"),
    ],
)
def test_changed_prompt_or_errors_are_not_comparable(
    runs: dict[str, Path], tmp_path: Path, edit: str, reason: str
) -> None:
    copy = tmp_path / "b_edit"
    shutil.copytree(runs["b"], copy)
    if edit == "prompt":
        man = json.loads((copy / "manifest.json").read_text())
        man["prompt_templates"]["musr"] = "0" * 64
        (copy / "manifest.json").write_text(json.dumps(man))
    else:
        s = json.loads((copy / "summary.json").read_text())
        s["total"]["outcomes"]["error"] = 1
        (copy / "summary.json").write_text(json.dumps(s))
    md = _report(tmp_path, str(runs["a"]), str(copy))
    assert reason in md
    assert {r[0]: r for r in _rows(md, "Capability, thinking off")}["total"][2].endswith("not comparable")


def test_repeats_pass_at_1_is_the_mean_of_per_question_scores(runs: dict[str, Path], tmp_path: Path) -> None:
    graded = _graded(runs["rep"])
    assert len(graded) == 16 * 3 and {g["repeat"] for g in graded} == {0, 1, 2}
    per_repeat = [{g["id"]: float(g["correct"]) for g in graded if g["repeat"] == k} for k in range(3)]
    ids = sorted(per_repeat[0])
    expected = sum(sum(r[q] for r in per_repeat) / 3 for q in ids) / len(ids)
    summary = json.loads((runs["rep"] / "summary.json").read_text())
    assert summary["total"]["pass_at_1"]["value"] == pytest.approx(expected, abs=1e-4)
    assert summary["total"]["correct"] == pytest.approx(expected * len(ids), abs=1e-3)
    lo, hi = summary["total"]["pass_at_1"]["ci95"]
    assert lo <= expected <= hi
    # Sampled repeats differ on the sim (a fresh draw per seed) as a real model's do at temperature.
    assert any(len({r[q] for r in per_repeat}) > 1 for q in ids)
    agreement = sum(len({r[q] for r in per_repeat}) == 1 for q in ids) / len(ids)
    assert summary["total"]["pass_at_1"]["agreement"] == pytest.approx(agreement, abs=1e-4)
    reqs = [json.loads(ln) for ln in (runs["rep"] / "requests.jsonl").read_text().splitlines()]
    assert sorted(r["repeat"] for r in reqs) == sorted(g["repeat"] for g in graded)
    md = _report(tmp_path, str(runs["rep"]))
    total = {r[0]: r for r in _rows(md, "Capability, thinking off")}["total"]
    assert total[1].startswith(f"{expected:.3f} [")
    assert "pass@1 is the mean over questions" in md


def test_thinking_run_shows_the_share_of_the_budget_thinking_used(runs: dict[str, Path], tmp_path: Path) -> None:
    graded = _graded(runs["think"])
    assert all(g["thinking"] and g["reasoning_tokens"] > 0 for g in graded)
    md = _report(tmp_path, str(runs["think"]), "--labels", "t")
    header = next(r for r in _rows(md, "How the model answered, thinking low: t") if r[0] == "dataset")
    row = {r[0]: r for r in _rows(md, "How the model answered, thinking low: t")}["gsm8k"]
    used = sorted(g["reasoning_tokens"] / 2000 for g in graded)
    median = (used[2] + used[3]) / 2
    assert header[-1] == "budget used by thinking p50" and row[-1] == f"{median * 100:.0f}%"
    reasoning = sorted(g["reasoning_tokens"] for g in graded)
    assert row[1] == f"{(reasoning[2] + reasoning[3]) / 2:.0f}"
