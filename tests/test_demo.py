"""The README's first command: `evalkit demo` runs every kind of run on simulated before/after servers."""

from __future__ import annotations

import json
from pathlib import Path


def test_demo_renders_a_before_after_report(demo_report: Path) -> None:
    folder = demo_report.parent
    text = demo_report.read_text()
    for heading in ("Throughput (bench)", "Capability", "Latency under load (stress)"):
        assert heading in text
    # The answer first: the per-build summary is the report's first section, the builds named by their profile.
    sections = [ln for ln in text.splitlines() if ln.startswith("## ")]
    assert sections[0] == "## The answer: after against before"
    assert "| build label | dual-2080ti-before | dual-2080ti-after |" in text
    for label in ("before", "after"):
        for kind in ("bench", "capability", "stress"):
            summary = json.loads((folder / f"{label}-{kind}" / "summary.json").read_text())
            assert summary["kind"] == kind
    after = json.loads((folder / "after-stress" / "summary.json").read_text())
    before = json.loads((folder / "before-stress" / "summary.json").read_text())
    assert before["diagnoses"]["effective_concurrency"] == 1 and after["diagnoses"]["effective_concurrency"] == 2
    assert all((folder / png).stat().st_size > 10_000 for png in ("report-ttft.png", "report-stress-timeline.png"))
    assert (folder / "report.html").is_file()


def test_demo_ends_by_printing_the_answer(demo_report: Path) -> None:
    """Issue #58: the terminal shows the answer, not only a path: the demo's standard output ends with the report's
    answer lines, marks and flags included, after the paths of report.md and report.html."""
    from evalkit.commands.demo import answer_lines

    shown = (demo_report.parent / "demo-stdout.txt").read_text().splitlines()
    answer = answer_lines(demo_report.read_text())
    assert answer[0] == "The answer: after against before"
    assert len(answer) >= 4 and any(ln.startswith("- ") and "**decode speed**" in ln for ln in answer)
    at = shown.index(f"report: {demo_report}")
    assert shown[at + 1] == f"page:   {demo_report.with_suffix('.html')}"
    tail = [ln for ln in shown[at + 2 :] if ln]
    assert tail[: len(answer)] == answer
    assert tail[len(answer) :] == [tail[-1]] and tail[-1].startswith("(▲ better beyond noise")
    marks = [ln.split(" ")[1] for ln in answer if ln.startswith("- ")]  # each item's mark, as report.md has it
    assert any(m in ("▲", "▼", "≈", "?", "⚠") for m in marks), answer


def test_demo_cancel_verdict_is_what_the_readme_shows(demo_report: Path) -> None:
    """Issue #58: the README's example says the after build's cancel stops the engine ('after yes'); the demo's
    after stress run judges it so (its stress scrapes the sim's gauges every 50 ms, so the cancel is seen)."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    example = readme[readme.index("The answer: after against before") :]
    cancel = next(ln for ln in example.splitlines() if "**cancel**" in ln)
    assert "before no, after yes" in cancel
    after = json.loads((demo_report.parent / "after-stress" / "summary.json").read_text())
    before = json.loads((demo_report.parent / "before-stress" / "summary.json").read_text())
    assert after["diagnoses"]["cancel_aborts"]["verdict"] == "yes", after["diagnoses"]["cancel_aborts"]
    assert before["diagnoses"]["cancel_aborts"]["verdict"] == "no", before["diagnoses"]["cancel_aborts"]
    answer = "\n".join(ln for ln in demo_report.read_text().splitlines() if "**cancel**" in ln)
    assert "before no, after yes" in answer
