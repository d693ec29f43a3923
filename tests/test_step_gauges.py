"""Cancel verdicts against a server whose request gauges change only when an engine step ends (vLLM's), over HTTP.

The sim with `--step-gauges --no-yield` runs a long prefill as one step and shows /metrics' running/waiting as they
were when the step before it ended: 0 on an idle server. Issue 40 saw evalkit read "0 after the cancel" as "the
cancel aborted the prefill" on a vLLM that ran it to its end. No timings and no server log: /metrics is all the
server says, as with a vLLM started without `--enable-log-requests`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.sim.launch import start_sim
from evalkit_stress.verdicts import CANT, NO, YES

SCALE = "25"


def _stress(tmp: Path, flags: list[str]) -> dict[str, Any]:
    sim_flags = [*flags, "--step-gauges", "--no-yield", "--no-timings", "--max-batch", "2"]
    with start_sim([*sim_flags, "--time-scale", SCALE, "--prefill-chunk", "512"]) as sim:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalkit",
                "stress",
                "--base-url",
                sim.base_url,
                "--out",
                str(tmp),
                "--name",
                "run",
                "--no-progress",
                "--cycles",
                "1",
                "--seed",
                "42",
                "--time-scale",
                SCALE,
                "--long-tokens",
                "16000",
                "--gen-tokens",
                "48",
                "--metrics-interval",
                "0.02",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stderr[-2000:]
        events = {e["request_id"]: e for e in sim.events()}
    run = Path(p.stdout.strip().splitlines()[-1])
    return {
        "summary": json.loads((run / "summary.json").read_text()),
        "events": events,
        "lines": [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()],
        "scrapes": [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()],
    }


def _busy(scrape: dict[str, Any]) -> float:
    return sum(
        v
        for k, v in scrape["series"].items()
        if k.split("{", 1)[0] in ("vllm:num_requests_running", "vllm:num_requests_waiting")
    )


@pytest.mark.parametrize("cancel", ["never", "chunk"])
def test_gauges_that_never_counted_the_request_do_not_judge_its_cancel(tmp_path: Path, cancel: str) -> None:
    r = _stress(tmp_path, ["--no-cancel-aborts"] if cancel == "never" else ["--cancel-aborts"])
    c = next(x for x in r["lines"] if x.get("scenario") == "cancel_then_short" and x.get("role") == "long")
    e = r["events"][c["request_id"]]
    truth = YES if e["stopped_at_tokens"] < e["prompt_tokens"] else NO
    assert truth == (NO if cancel == "never" else YES)
    # What misled the old rule: scrapes inside the cancelled prefill's step read nothing running or waiting
    # although the engine was prefilling it (it stopped at engine_stopped, after the cancel).
    inside = [s for s in r["scrapes"] if s.get("ok") and c["t_sent"] + 0.05 <= s["t"] < e["engine_stopped"] - 0.05]
    assert inside and all(_busy(s) == 0 for s in inside), [(s["t"], _busy(s)) for s in inside]
    if cancel == "never":
        # the old rule took the first scrape after the cancel reading 0, well inside the prefill left, as "gone"
        after = [s for s in inside if s["t"] >= c["t_done"]]
        assert after and after[0]["t"] - c["t_done"] < 0.5 * (e["engine_stopped"] - c["t_done"])
    ca = r["summary"]["diagnoses"]["cancel_aborts"]
    print(f"\ncancel {cancel}: truth {truth}, verdict {ca['verdict']} ({ca['evidence']}); {ca['samples'][0]}")
    assert ca["verdict"] in (truth, CANT), ca
    assert ca["evidence"] != "metrics" or ca["verdict"] == CANT, ca  # never a yes/no from gauges blind to it
    if ca["verdict"] == CANT:
        assert ca["would_tell"]
    # what would tell is advice for this server (seen through /metrics only), not llama.cpp's trace log
    for said in [ca.get("would_tell")] + [(x.get("next_delay") or {}).get("would_tell") for x in ca["samples"]]:
        assert "-lv 4" not in (said or "") and "--no-cache-idle-slots" not in (said or ""), said
