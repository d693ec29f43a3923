"""A real `git bisect run` with examples/bisect_step.sh: commits change the sim's decode rate; it finds the planted
one."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.addresses import free_port
from evalkit.cli import main
from evalkit.runs.rundir import read_jsonl

REPO = Path(__file__).resolve().parent.parent
STEP = REPO / "examples" / "bisect_step.sh"
TIME_SCALE = 10
# The write-up's bisect: good at >= 96 tok/s, bad at <= 89; the sim runs TIME_SCALE times faster.
RATES = [100, 101, 102, 102, 85, 84.7, 84.7, 84.7]  # the 5th commit (index 4) is the planted regression
PLANTED = 4


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("curl") is None or shutil.which("setsid") is None,
    reason="needs git, curl and setsid",
)
def test_git_bisect_run_lands_on_planted_commit(tmp_path: Path) -> None:
    repo = tmp_path / "server-src"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i, rate in enumerate(RATES):
        (repo / "rate").write_text(f"{rate}\n")
        (repo / "notes.txt").write_text(f"change {i}\n")
        git(repo, "add", "rate", "notes.txt")
        git(
            repo,
            "commit",
            "-q",
            "-m",
            "RMSNorm reduction" if i == PLANTED else f"change {i}",
            date=f"2026-09-{21 + i}T12:00:00",
        )
        shas.append(git(repo, "rev-parse", "--short", "HEAD").strip())
    port = free_port()
    log = tmp_path / "bisect-log.jsonl"
    env = {
        **os.environ,
        "BISECT_BUILD": "test -s rate",  # nothing to compile: the "server" reads its speed from the tree
        "BISECT_SERVER": f"{sys.executable} -m evalkit sim --port {port} --decode-rate $(cat rate) "
        f"--time-scale {TIME_SCALE}",
        "BISECT_PORT": str(port),
        "BISECT_GOOD": str(96 * TIME_SCALE),
        "BISECT_BAD": str(89 * TIME_SCALE),
        "BISECT_RUNS": "1",
        "BISECT_MAX_TOKENS": "128",
        "BISECT_WAIT_S": "60",
        "BISECT_LOG": str(log),
        "BISECT_OUT": str(tmp_path / "runs"),
        "EVALKIT": f"{sys.executable} -m evalkit",
    }
    git(repo, "bisect", "start", shas[-1], shas[0])
    run = subprocess.run(
        ["git", "bisect", "run", str(STEP)], cwd=repo, env=env, capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{git(repo, 'rev-parse', shas[PLANTED]).strip()} is the first bad commit" in run.stdout, run.stdout
    git(repo, "bisect", "reset")
    steps = read_jsonl(log)
    assert steps and {s["verdict"] for s in steps} <= {"good", "bad"}
    for s in steps:
        rate = RATES[shas.index(s["commit"])] * TIME_SCALE
        assert s["tok_s"] == pytest.approx(rate, rel=0.05)
        assert s["verdict"] == ("good" if rate >= 96 * TIME_SCALE else "bad")
    # No sim is left running on the step's port.
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    # The log renders as the write-up's commit table, in commit order.
    out = tmp_path / "bisect.md"
    assert main(["report", "--bisect-log", str(log), "-o", str(out)]) == 0
    md = out.read_text()
    rows = [line for line in md.splitlines() if line.startswith("| ") and line.split("|")[1].strip() in shas]
    assert [r.split("|")[1].strip() for r in rows] == sorted({s["commit"] for s in steps}, key=shas.index)
    # git bisect always measures the first bad commit itself, so its row is in the table.
    assert any(
        r.startswith(f"| {shas[PLANTED]} | RMSNorm reduction |") and r.rstrip().endswith("| bad |") for r in rows
    ), md


def test_unbuildable_commit_is_skipped(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "x").write_text("1")
    git(repo, "add", "x")
    git(repo, "commit", "-q", "-m", "x")
    env = {
        **os.environ,
        "BISECT_BUILD": "false",
        "BISECT_SERVER": "sleep 60",
        "BISECT_GOOD": "2",
        "BISECT_BAD": "1",
        "BISECT_OUT": str(tmp_path / "runs"),
    }
    assert subprocess.run([str(STEP)], cwd=repo, env=env, capture_output=True).returncode == 125
    env["BISECT_BUILD"] = "true"
    env["BISECT_SERVER"] = "exit 3"  # the server dies at once: skip, without waiting the full BISECT_WAIT_S
    env["BISECT_PORT"] = str(free_port())
    assert subprocess.run([str(STEP)], cwd=repo, env=env, capture_output=True, timeout=30).returncode == 125
