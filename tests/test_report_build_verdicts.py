"""The report a person reads first, on real run files (the H200 llama.cpp runs committed under results/examples):
the per-build answer on top, a run that flags its own client marked where its figures stand and never called beyond
noise, and every verdict in words with its figures (a scan of the rendered report for code names and exponents)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from evalkit.cli import main
from evalkit.report.formatting import CODE_NAMES

H200 = Path(__file__).resolve().parent.parent / "results" / "examples" / "gpu-h200" / "llamacpp-issue27"


def _render(tmp_path: Path, distort: bool) -> str:
    runs = []
    for name in ("np1", "np2-noidle"):
        dst = tmp_path / name
        shutil.copytree(H200 / name / "stress", dst, ignore=shutil.ignore_patterns("gpu_memory.jsonl"))
        runs.append(dst)
    if distort:
        summary = json.loads((runs[1] / "summary.json").read_text())
        summary["client"]["distorted"] = True
        summary["client"]["distortion_reasons"] = ["send lateness p95 90.0 ms exceeds 10% of the smallest p50"]
        (runs[1] / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "report.md"
    assert main(["report", *map(str, runs), "--labels", "np1,np2", "-o", str(out), "--no-html"]) == 0
    return out.read_text()


def _table(text: str, title: str) -> list[list[str]]:
    block = text.split(f"### {title}", 1)[1].split("\n\n", 2)[1]
    return [[c.strip() for c in ln.strip().split(" | ")] for ln in block.splitlines()[2:]]


def test_the_answer_comes_first_with_verdicts_in_words_and_their_figures(tmp_path: Path) -> None:
    text = _render(tmp_path, distort=False)
    sections = [ln for ln in text.splitlines() if ln.startswith("## ")]
    assert sections[0] == "## The answer: np2 against np1"
    answer = text.split("## Builds compared", 1)[0]
    assert "**short request during a long prefill**" in answer and "**cancel**" in answer
    # Figures the summary holds, in the answer's sentences.
    s1 = json.loads((tmp_path / "np1" / "summary.json").read_text())
    s2 = json.loads((tmp_path / "np2-noidle" / "summary.json").read_text())
    p95 = [s["metrics"]["short_insert_ttft_s"]["p95"] for s in (s1, s2)]
    assert f"{p95[0]:.2f} s → {p95[1]:.2f} s" in answer
    # Verdict cells: sentences with figures, no identifier, no exponent.
    rows = _table(text, "Diagnoses (stress)")
    assert len(rows) >= 3
    for row in rows:
        for cell in row[1:]:
            words_only = re.sub(r"`[^`]*`", "", cell)
            for name in CODE_NAMES:
                assert not re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", words_only), (name, cell)
            if cell.startswith(("yes", "no")):
                assert re.search(r"\d(\.\d+)? (s|ms|tok/s)\b|\d×", cell), cell
    # The next request's wait after a cancel keeps its seconds and says what held it.
    cancel = next(r for r in rows if "diagnoses.cancel_aborts" in r[0])
    worst = max(x["next_delay"]["wait_s"] for x in s2["diagnoses"]["cancel_aborts"]["samples"] if x.get("next_delay"))
    assert f"waited up to {worst:.2f} s" in cancel[2]
    assert "a wait no server timing or log line accounts for" in text or "unattributed" not in text
    assert not re.search(r"\d[eE][+-]\d", text)


def test_a_distorted_run_is_marked_and_never_beyond_noise(tmp_path: Path) -> None:
    text = _render(tmp_path, distort=True)
    answer = text.split("## Builds compared", 1)[0]
    assert "⚠ np2 stress: the client distorted this run" in answer
    for line in answer.splitlines():
        if line.startswith("- ") and "**" in line:
            assert not line.startswith(("- ▲", "- ▼")), line
    assert "⚠ np2 (stress): the client distorted this run" in text
    rows = _table(text, "Latency under a long prefill (stress)")
    marked = [r for r in rows if "%" in r[2]]
    assert marked and all("⚠" in r[2] and "▲" not in r[2] and "▼" not in r[2] for r in marked)
    # The same runs undistorted get the comparison rule's own marks (here "?": 2 cycles against 1 are too few for
    # the rank test to reach its level), not ⚠: the ⚠ is the flag's doing.
    clean = _table(_render(tmp_path / "clean", distort=False), "Latency under a long prefill (stress)")
    clean_marked = [r for r in clean if "%" in r[2]]
    assert clean_marked and all("⚠" not in r[2] for r in clean_marked)
    assert all(any(m in r[2] for m in ("▲", "▼", "≈", "?")) for r in clean_marked)


def test_a_client_error_budget_over_a_millisecond_is_marked(tmp_path: Path) -> None:
    """The client's error budget as the client writes it (`client.error_budget_s`, the p99 of how far a first
    token's stamp may lie after its arrival; `first_tokens_maybe_shared_stamp`): over 1 ms is flagged, within it
    is not, and a summary from before the budget existed is not."""
    from evalkit.report.runs import LabelledRun
    from evalkit.report.trust import run_flags
    from evalkit.runs.summaries import load_runs

    dst = tmp_path / "np2"
    shutil.copytree(H200 / "np2-noidle" / "stress", dst, ignore=shutil.ignore_patterns("gpu_memory.jsonl"))
    summary = json.loads((dst / "summary.json").read_text())
    assert "error_budget_s" not in summary["client"]  # written before the budget existed
    assert run_flags(LabelledRun("np2", load_runs([dst])[0])) == []
    for budget, flagged in ((0.0004, False), (0.0025, True)):
        summary["client"].update(error_budget_s=budget, first_tokens_maybe_shared_stamp=3, read_lag_p99_s=0.02)
        (dst / "summary.json").write_text(json.dumps(summary))
        flags = run_flags(LabelledRun("np2", load_runs([dst])[0]))
        assert [f.key for f in flags] == (["client_error_budget"] if flagged else [])
        if flagged:
            assert "up to 2.5 ms after its true arrival (p99) (3 first token(s)" in flags[0].words
