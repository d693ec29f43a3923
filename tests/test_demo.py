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
