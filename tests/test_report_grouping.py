"""`evalkit report` without --labels groups runs by the build identity in their manifests (issue #58): runs of two
builds, told apart only by what each run recorded (here `--build-info commit=...`, no `--build-label`), are compared
as two builds, and the report says on standard error how it grouped them; runs that show one identity stay one
column each and the line says how to name the builds. Real bench and capability runs against two sims over HTTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.sim.launch import start_sim


def _evalkit(*argv: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([sys.executable, "-m", "evalkit", *argv], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return p


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> list[Path]:
    """A bench and a capability run of each of two builds (commit aaa: the before profile, bbb: the after one)."""
    out = tmp_path_factory.mktemp("grouping")
    runs = []
    for commit, profile in (("aaa", "dual-2080ti-before"), ("bbb", "dual-2080ti-after")):
        with start_sim(["--profile", profile, "--data-dir", str(data_dir)]) as sim:
            common = ["--base-url", sim.base_url, "--out", str(out), "--build-info", f"commit={commit}"]
            _evalkit("bench", *common, "--name", f"{commit}-bench", "--max-tokens", "16")
            _evalkit(
                "capability",
                *common,
                "--name",
                f"{commit}-cap",
                "--thinking",
                "off",
                "--datasets",
                "gsm8k",
                "--limit",
                "2",
                "--data-dir",
                str(data_dir),
            )
        runs += [out / f"{commit}-bench", out / f"{commit}-cap"]
    return runs


def test_report_groups_runs_by_build_identity_without_labels(two_builds: list[Path], tmp_path: Path) -> None:
    p = _evalkit("report", *map(str, two_builds), "-o", str(tmp_path / "report.md"), "--no-html")
    said = p.stderr.splitlines()
    assert "report: no --labels: 4 run(s) grouped into 2 build(s) by the build identity in each manifest" in said[0]
    assert "(they differ in commit)" in said[0]
    assert "  commit=aaa: aaa-bench, aaa-cap" in said and "  commit=bbb: bbb-bench, bbb-cap" in said
    text = (tmp_path / "report.md").read_text()
    assert "## The answer: commit=bbb against commit=aaa" in text
    assert "no run of the same kind in both builds to compare" not in text
    assert "**decode speed**" in text and "**answers (thinking off)**" in text


def test_labels_still_name_the_columns(two_builds: list[Path], tmp_path: Path) -> None:
    p = _evalkit(
        "report", *map(str, two_builds), "--labels", "old,old,new,new", "-o", str(tmp_path / "r.md"), "--no-html"
    )
    assert "grouped" not in p.stderr
    assert "## The answer: new against old" in (tmp_path / "r.md").read_text()


def test_one_identity_is_said_and_left_as_directories(tmp_path: Path) -> None:
    with start_sim([]) as sim:
        for name in ("first", "second"):
            _evalkit("bench", "--base-url", sim.base_url, "--out", str(tmp_path), "--name", name, "--max-tokens", "8")
    p = _evalkit("report", str(tmp_path / "first"), str(tmp_path / "second"), "-o", str(tmp_path / "r.md"), "--no-html")
    line = next(ln for ln in p.stderr.splitlines() if ln.startswith("report: no --labels"))
    assert "every run shows one build identity (model evalkit-sim)" in line and "--build-label" in line
    assert "## The answer: second against first" in (tmp_path / "r.md").read_text()
