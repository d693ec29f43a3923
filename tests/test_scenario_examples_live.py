"""The example scenario files against `evalkit sim` over real HTTP: every expectation passes on the write-up's after
build and the ones each file names fail on the before build (exit 1); the sim's own event record confirms that
requests were sent at the events the file times them from.

The after runs use `--time-scale 20`; the before runs, whose failing waits are 5-20x over the limits, use 50, and
the 30-round cancel example runs 6 rounds there (each before round waits ~12 s of zombie prefill; the failing
expectation does not depend on the count). `--reuse-long-prompt` saves fitting 30 long prompts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from evalkit.sim.launch import start_sim

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "scenarios"

# file, extra flags, the expectations that must fail on dual-2080ti-before
CASES = [
    ("third-request-waits.toml", [], {"pair.ttft_s.max <= 1.5"}),
    ("cancel-while-streaming.toml", ["--reuse-long-prompt"], {"after_cancel.ttft_s.p95 <= 2.0"}),
    ("mid-length-inserts.toml", [], {"short.ttft_s.p95 <= 2.0"}),
    ("soak.toml", ["--cycles", "2"], {"short.ttft_s.p95 <= 2.0"}),
]


def run_example(
    profile: str, scale: str, name: str, flags: list[str], out: Path, rounds: int | None = None
) -> dict[str, Any]:
    path = EXAMPLES / name
    if rounds is not None:
        text = path.read_text().replace("rounds = 30", f"rounds = {rounds}")
        text = "\n".join(x for x in text.splitlines() if '"cancelled ==' not in x and '"requests ==' not in x)
        path = out / name
        path.write_text(text)
    with start_sim(["--profile", profile, "--time-scale", scale]) as sim:
        p = subprocess.run(
            [
                sys.executable,
                "-m",
                "evalkit",
                "stress",
                "--base-url",
                sim.base_url,
                "--out",
                str(out),
                "--name",
                f"{profile}-{name}",
                "--no-progress",
                "--time-scale",
                scale,
                "--scenario",
                str(path),
                *flags,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        events = {e["request_id"]: e for e in sim.events()}
    run = Path(p.stdout.strip().splitlines()[-1])
    lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
    return {
        "rc": p.returncode,
        "stdout": p.stdout,
        "stderr": p.stderr,
        "run": run,
        "events": events,
        "lines": lines,
        "summary": json.loads((run / "summary.json").read_text()),
    }


def failed(r: dict[str, Any]) -> set[str]:
    return {e["expect"] for e in r["summary"]["expectations"] if not e["passed"]}


@pytest.mark.parametrize("name,flags,fail_before", CASES, ids=[c[0] for c in CASES])
def test_example_passes_after_and_fails_before(
    name: str, flags: list[str], fail_before: set[str], tmp_path: Path
) -> None:
    after = run_example("dual-2080ti-after", "20", name, flags, tmp_path)
    assert after["rc"] == 0, after["stdout"][-2000:] + after["stderr"][-2000:]
    assert not failed(after) and after["summary"]["expectations"]
    assert all(f"PASS {s}" in after["stdout"] for s in after["summary"]["scenarios"])
    before = run_example(
        "dual-2080ti-before", "50", name, flags, tmp_path, rounds=6 if name == "cancel-while-streaming.toml" else None
    )
    assert before["rc"] == 1, before["stdout"][-2000:] + before["stderr"][-2000:]
    assert fail_before <= failed(before), failed(before)
    assert "FAIL " in before["stdout"]
    if name == "cancel-while-streaming.toml":
        check_event_timing(after)


def check_event_timing(r: dict[str, Any]) -> None:
    # Each cancelled long prompt reached the server after its round's stream had its first token, and the short
    # reached it after the long was cancelled: the sim's own clock says so, not the client's.
    ev, by_plan = r["events"], {x["plan_id"]: x for x in r["lines"]}
    rounds = {x["plan_id"].rsplit("-", 1)[0] for x in r["lines"]}
    assert len(rounds) == 30 and len(r["lines"]) == 90
    for prefix in rounds:
        stream, long, short = (ev[by_plan[f"{prefix}-{k}"]["request_id"]] for k in ("stream", "long", "after_cancel"))
        assert long["arrived"] >= stream["first_token"] - 0.005
        # The short follows the client's cancel (the sim notices it at its next chunk, later).
        assert long["cancelled"] and short["arrived"] >= by_plan[f"{prefix}-long"]["t_done"] - 0.005
    # Recomputed from the run directory alone, the scenario part of the summary is the same.
    from evalkit_stress.scenario_results import scenario_summary

    again = scenario_summary(r["run"])
    assert again["expectations"] == r["summary"]["expectations"]
