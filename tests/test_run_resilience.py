"""A run survives SIGKILL and resumes with the same --name; no API key ever reaches a run directory."""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from evalkit.runs.rundir import read_jsonl

SECRET = "sk-evalkit-test-SECRET-0123456789"


def _capability_cmd(base_url: str, out: Path, name: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "evalkit",
        "capability",
        "--thinking",
        "off",
        "--datasets",
        "gsm8k",
        "--limit",
        "24",
        "--concurrency",
        "2",
        "--base-url",
        base_url,
        "--out",
        str(out),
        "--name",
        name,
    ]


def test_sigkill_midway_then_resume_has_every_request_exactly_once(sim, tmp_path):
    # Slow enough decode that the run is surely mid-way when killed: 24 questions x ~0.15 s / 2 streams.
    server = sim("--decode-rate", "400", "--prefill-rate", "20000")
    cmd = _capability_cmd(server.base_url, tmp_path, "killed")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    graded = tmp_path / "killed" / "graded.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(read_jsonl(graded)) < 6:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(read_jsonl(graded))
    assert 6 <= before < 24, f"kill landed at {before} of 24; the test needs a run killed mid-way"

    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(tmp_path / "killed")
    ids = [r["id"] for r in read_jsonl(graded)]
    assert len(ids) == 24 and len(set(ids)) == 24, collections.Counter(ids).most_common(3)
    requests = read_jsonl(tmp_path / "killed" / "requests.jsonl")
    ok_ids = [r["request_id"] for r in requests if r["status"] == "ok"]
    assert len(ok_ids) == len(set(ok_ids))
    # every graded answer came from exactly one recorded request
    graded_rids = [r["request_id"] for r in read_jsonl(graded)]
    assert sorted(graded_rids) == sorted(set(graded_rids))
    assert set(graded_rids) <= set(ok_ids)
    summary = json.loads((tmp_path / "killed" / "summary.json").read_text())
    assert (summary["total"]["correct"], summary["total"]["total"]) == (24, 24)
    assert json.loads((tmp_path / "killed" / "manifest.json").read_text())["resumes"]


def test_api_key_never_written_to_run_directory(sim, tmp_path):
    server = sim("--time-scale", "50")
    env = {**os.environ, "MY_EVALKIT_KEY": SECRET}
    runs = [
        ["capability", "--thinking", "low", "--datasets", "gsm8k,musr", "--limit", "2"],
        ["bench", "--runs", "1", "--max-tokens", "32"],
        ["stress", "--cycles", "1", "--seed", "3", "--long-tokens", "3000", "--time-scale", "50"],
    ]
    for i, args in enumerate(runs):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalkit",
                *args,
                "--base-url",
                server.base_url,
                "--api-key-env",
                "MY_EVALKIT_KEY",
                "--out",
                str(tmp_path),
                "--name",
                f"r{i}",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert out.returncode in (0, 1), out.stderr
        assert SECRET not in out.stdout and SECRET not in out.stderr
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 9
    for p in files:
        assert SECRET.encode() not in p.read_bytes(), p
    # the name of the variable is recorded, its value is not
    assert json.loads((tmp_path / "r0" / "manifest.json").read_text())["server"]["api_key_env"] == "MY_EVALKIT_KEY"
