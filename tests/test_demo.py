"""The README's first command: `evalkit demo` runs every kind of run on simulated before/after servers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def test_demo_renders_a_before_after_report(tmp_path, data_dir):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "evalkit",
            "demo",
            "--out",
            str(tmp_path),
            "--name",
            "d",
            "--cycles",
            "1",
            "--limit",
            "1",
            "--time-scale",
            "20",
            "--data-dir",
            str(data_dir),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    report = Path(out.stdout.strip().splitlines()[-1])
    assert report == tmp_path / "d" / "report.md"
    text = report.read_text()
    for heading in ("Throughput (bench)", "Capability", "Latency under load (stress)"):
        assert heading in text
    for label in ("before", "after"):
        for kind in ("bench", "capability", "stress"):
            summary = json.loads((tmp_path / "d" / f"{label}-{kind}" / "summary.json").read_text())
            assert summary["kind"] == kind
    after = json.loads((tmp_path / "d" / "after-stress" / "summary.json").read_text())
    before = json.loads((tmp_path / "d" / "before-stress" / "summary.json").read_text())
    assert before["diagnoses"]["effective_concurrency"] == 1 and after["diagnoses"]["effective_concurrency"] == 2
    assert all(
        (tmp_path / "d" / png).stat().st_size > 10_000 for png in ("report-ttft.png", "report-stress-timeline.png")
    )
